//go:build unix

package examples_test

import (
	"os/exec"
	"syscall"
)

// ownGroup puts cmd in a process group of its own, so that killGroup
// reaches the children it forks (php -S with PHP_CLI_SERVER_WORKERS).
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group: cmd and every child it forked.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
