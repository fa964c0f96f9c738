package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

const (
	adminUser      = "kinformer-admin"
	adminGroup     = "system:masters"
	restrictedUser = "restricted"
	certLifetime   = 7 * 24 * time.Hour
)

// keyPair is a certificate together with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newECKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// issue creates a certificate from tmpl, signed by parent (self-signed when
// parent is nil), with a new P-256 key.
func issue(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := newECKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(certLifetime)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func newCA(cn string) (*keyPair, error) {
	return issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
}

func writeCert(path string, kp *keyPair) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}), 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// generatePKI writes every certificate, key and the token file of l.
func generatePKI(l layout) error {
	if err := os.MkdirAll(l.PKIDir, 0o700); err != nil {
		return err
	}

	// Serving side.
	ca, err := newCA("kinformer-e2e-ca")
	if err != nil {
		return err
	}
	serving, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	}, ca)
	if err != nil {
		return err
	}

	// Client side.
	clientCA, err := newCA("kinformer-e2e-client-ca")
	if err != nil {
		return err
	}
	admin, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: adminUser, Organization: []string{adminGroup}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, clientCA)
	if err != nil {
		return err
	}

	// Service-account token signing key (RSA: what every consumer accepts).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}

	// Static token for a user that no RBAC binding mentions.
	token, err := randomToken()
	if err != nil {
		return err
	}

	steps := []error{
		writeCert(l.CACert, ca),
		writeCert(l.ServingCert, serving),
		writeKey(l.ServingKey, serving.key),
		writeCert(l.ClientCACert, clientCA),
		writeCert(l.AdminCert, admin),
		writeKey(l.AdminKey, admin.key),
		writeKey(l.SASigningKey, saKey),
		writeFileAtomic(l.SAPublicKey, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}), 0o644),
		// token,user,uid (no groups: the user only gets system:authenticated).
		writeFileAtomic(l.TokenFile, []byte(fmt.Sprintf("%s,%s,%s-uid\n", token, restrictedUser, restrictedUser)), 0o600),
		writeFileAtomic(l.RestrictedToken, []byte(token), 0o600),
	}
	for _, e := range steps {
		if e != nil {
			return e
		}
	}
	return nil
}
