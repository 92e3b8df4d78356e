package unpack

import "github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"

// The crafted tarballs of the tests.
type tarEntry = tartest.Entry

var (
	file          = tartest.File
	dir           = tartest.Dir
	symlink       = tartest.Symlink
	craftTgz      = tartest.Tgz
	tarHeaderMode = tartest.Header
)
