// go-fuse's POSIX test table (github.com/hanwen/go-fuse/v2/posixtest), run by
// tests/gofuse/test_gofuse_posix.py on memfs and on kernel tmpfs.
module memfs/tests/gofuse

go 1.21

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.28.0 // indirect
