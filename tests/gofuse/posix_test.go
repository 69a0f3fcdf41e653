// Package gofuse runs go-fuse's POSIX test table (posixtest.All), an
// independent suite several FUSE file systems share, on the directory in
// $POSIX_DIR: each test gets a fresh subdirectory. Built and run by
// test_gofuse_posix.py, once on memfs and once on kernel tmpfs.
package gofuse

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// Tests whose expectation is wrong on every Linux file system, kernel tmpfs
// included; go-fuse's own TestAll skips them too.
var wrong = map[string]string{
	// Takes a write lock and then a read lock on one file from one process
	// and expects EAGAIN; POSIX record locks belong to the process, so the
	// second call replaces the first and succeeds.
	"FcntlFlockLocksFile": "expects a lock conflict within one process",
}

func TestPosix(t *testing.T) {
	dir := os.Getenv("POSIX_DIR")
	if dir == "" {
		t.Fatal("set POSIX_DIR to the directory to test")
	}
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			if why, ok := wrong[name]; ok {
				t.Skip(why)
			}
			sub := filepath.Join(dir, name)
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatalf("MkdirAll: %v", err)
			}
			fn(t, sub)
			if err := os.RemoveAll(sub); err != nil {
				t.Errorf("RemoveAll: %v", err)
			}
		})
	}
}
