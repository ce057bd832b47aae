//go:build !linux

package testenv

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts a child in a process group of its own, so a ^C or a
// signal to the test's group does not reach it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// startCmd starts cmd.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
