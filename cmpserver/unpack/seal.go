package unpack

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A shared tree's permission bits do not protect it from the plugin's commands:
// they run as the tree's owner (the sidecar's UID 999), and an owner may chmod
// its own files writable again; root ignores the bits altogether. A read-only
// mount, another owner or an immutable flag all need privileges the sidecar
// does not have. What no unprivileged process can do is choose an inode's
// change time (ctime): every write, truncation, chmod, chown, link, rename or
// removal sets it to the kernel's clock, and setting it back takes changing
// the clock (CAP_SYS_TIME). So a tree is sealed once unpacked: a digest of
// every entry's path, inode, type, mode, owner, link count, size, mtime and
// ctime, in a fixed order. A tree whose digest later differs has been changed
// (an added or removed entry changes its directory's times), and nothing
// produced from it is used (see request.run).
type treeSeal struct {
	sum     [sha256.Size]byte
	entries int
}

// maxSealWait bounds how long sealing waits for the file system's clock to
// pass the tree's last change (see sealTree): a tick for most file systems,
// up to a second for those that keep whole seconds.
const maxSealWait = 3 * time.Second

// sealTree seals the complete tree at root. probe is a directory on the same
// file system that is not part of the tree (the request dir): its ctime shows
// the file system's clock.
func sealTree(root, probe string) (treeSeal, error) {
	sl, last, err := digestTree(root)
	if err != nil {
		return treeSeal{}, err
	}
	// A change in the same clock tick as the unpacking (timestamps are only as
	// fine as the kernel's coarse clock, or the file system's granularity)
	// would carry the very ctime the seal recorded. Wait until the clock has
	// moved past every recorded ctime; the tree is not used before.
	deadline := time.Now().Add(maxSealWait)
	for {
		now, err := fsNow(probe)
		if err != nil {
			return treeSeal{}, err
		}
		if now.After(last) {
			return sl, nil
		}
		if time.Now().After(deadline) {
			return treeSeal{}, fmt.Errorf("the file system's clock did not pass %s within %s", last, maxSealWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// fsNow is the file system's current time: the ctime a chmod gives dir.
func fsNow(dir string) (time.Time, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return time.Time{}, err
	}
	if err := os.Chmod(dir, fi.Mode().Perm()); err != nil {
		return time.Time{}, err
	}
	if fi, err = os.Lstat(dir); err != nil {
		return time.Time{}, err
	}
	return ctime(fi), nil
}

// check reports whether the tree at root is still what was sealed.
func (s treeSeal) check(root string) error {
	sl, _, err := digestTree(root)
	switch {
	case err != nil:
		return fmt.Errorf("the shared tree cannot be checked: %w", err)
	case sl.entries != s.entries:
		return fmt.Errorf("the shared tree has %d entries instead of %d", sl.entries, s.entries)
	case sl.sum != s.sum:
		return errors.New("an entry of the shared tree was changed")
	}
	return nil
}

// digestTree hashes every entry under root in lexical order and returns the
// latest ctime among them. Reading the tree changes only access times, which
// are left out.
func digestTree(root string) (treeSeal, time.Time, error) {
	h := sha256.New()
	var last time.Time
	n := 0
	var buf []byte
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("no inode data for %s", p)
		}
		rel, _ := filepath.Rel(root, p)
		buf = append(buf[:0], rel...)
		buf = append(buf, 0)
		for _, v := range []uint64{st.Dev, st.Ino, uint64(st.Mode), uint64(st.Uid), uint64(st.Gid), uint64(st.Nlink),
			uint64(st.Size), uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec), uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec)} {
			buf = binary.LittleEndian.AppendUint64(buf, v)
		}
		h.Write(buf)
		if c := ctime(fi); c.After(last) {
			last = c
		}
		n++
		return nil
	})
	if err != nil {
		return treeSeal{}, time.Time{}, err
	}
	s := treeSeal{entries: n}
	h.Sum(s.sum[:0])
	return s, last, nil
}

func ctime(fi fs.FileInfo) time.Time {
	st := fi.Sys().(*syscall.Stat_t)
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}
