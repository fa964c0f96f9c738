//go:build tools

// Package main: this file only exists so that `go mod tidy` keeps
// k8s.io/kubernetes/cmd/kube-apiserver (built separately by launcher.sh)
// in go.mod/go.sum.
package main

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
