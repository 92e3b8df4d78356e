// Package unlinked creates files that have no name.
package unlinked

import "os"

// Create creates a temp file in dir and removes its name at once: no
// command or later request can see it, and it goes away with the descriptor
// whatever happens (the work dir is wiped at start should the process die in
// between). The spooled tarball and a command's stdout use it.
func Create(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
