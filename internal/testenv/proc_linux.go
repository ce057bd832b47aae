package testenv

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr puts a child in a process group of its own (so a ^C or a
// signal to the test's group does not reach it) and has the kernel SIGKILL
// it should the test binary die without running its cleanups (a panic, a
// go test -timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// The parent-death signal fires when the OS thread that forked the child
// exits, not the process, and Go ends a thread when a goroutine that locked
// it returns without unlocking. So every child is started from one
// goroutine that stays locked to its thread for the life of the test binary.
var (
	starterOnce sync.Once
	starterReqs chan startReq
)

type startReq struct {
	cmd *exec.Cmd
	err chan error
}

// startCmd runs cmd.Start on the dedicated starter thread.
func startCmd(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starterReqs = make(chan startReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the binary
			for r := range starterReqs {
				r.err <- r.cmd.Start()
			}
		}()
	})
	r := startReq{cmd: cmd, err: make(chan error, 1)}
	starterReqs <- r
	return <-r.err
}
