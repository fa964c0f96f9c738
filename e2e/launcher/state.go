package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// layout names every file the launcher writes under DIR.
type layout struct {
	Dir        string `json:"dir"`
	PKIDir     string `json:"pki_dir"`
	EtcdData   string `json:"etcd_data_dir"`
	LogDir     string `json:"log_dir"`
	Kubeconfig string `json:"kubeconfig"`
	State      string `json:"-"`

	CACert          string `json:"ca_cert"`          // serving CA (clients trust it)
	ServingCert     string `json:"serving_cert"`     // kube-apiserver TLS cert
	ServingKey      string `json:"serving_key"`      //
	ClientCACert    string `json:"client_ca_cert"`   // CA that signs client certs
	AdminCert       string `json:"admin_cert"`       // CN=kinformer-admin, O=system:masters
	AdminKey        string `json:"admin_key"`        //
	TokenFile       string `json:"token_file"`       // --token-auth-file
	RestrictedToken string `json:"restricted_token"` // the restricted user's bearer token, alone
	SAPublicKey     string `json:"sa_public_key"`    // --service-account-key-file
	SASigningKey    string `json:"sa_signing_key"`   // --service-account-signing-key-file
	EtcdLog         string `json:"etcd_log"`         //
	APIServerLog    string `json:"apiserver_log"`    //
}

func newLayout(dir string) (layout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return layout{}, err
	}
	pki := filepath.Join(abs, "pki")
	logs := filepath.Join(abs, "logs")
	return layout{
		Dir:             abs,
		PKIDir:          pki,
		EtcdData:        filepath.Join(abs, "etcd"),
		LogDir:          logs,
		Kubeconfig:      filepath.Join(abs, "kubeconfig"),
		State:           filepath.Join(abs, "state.json"),
		CACert:          filepath.Join(pki, "ca.crt"),
		ServingCert:     filepath.Join(pki, "apiserver.crt"),
		ServingKey:      filepath.Join(pki, "apiserver.key"),
		ClientCACert:    filepath.Join(pki, "client-ca.crt"),
		AdminCert:       filepath.Join(pki, "admin.crt"),
		AdminKey:        filepath.Join(pki, "admin.key"),
		TokenFile:       filepath.Join(pki, "tokens.csv"),
		RestrictedToken: filepath.Join(pki, "restricted.token"),
		SAPublicKey:     filepath.Join(pki, "sa.pub"),
		SASigningKey:    filepath.Join(pki, "sa.key"),
		EtcdLog:         filepath.Join(logs, "etcd.log"),
		APIServerLog:    filepath.Join(logs, "kube-apiserver.log"),
	}, nil
}

// procState is one background process.
type procState struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
	Log  string   `json:"log"`
}

// state is DIR/state.json: everything needed to find, stop and restart the
// processes of one `up`.
type state struct {
	Paths         layout    `json:"paths"`
	EtcdClient    int       `json:"etcd_client_port"`
	EtcdPeer      int       `json:"etcd_peer_port"`
	APIServerPort int       `json:"apiserver_port"`
	APIServerURL  string    `json:"apiserver_url"`
	EtcdURL       string    `json:"etcd_url"`
	Etcd          procState `json:"etcd"`
	APIServer     procState `json:"apiserver"`
}

func loadState(l layout) (*state, error) {
	b, err := os.ReadFile(l.State)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", l.State, err)
	}
	s.Paths.State = l.State
	return &s, nil
}

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(s.Paths.State, append(b, '\n'), 0o644)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
