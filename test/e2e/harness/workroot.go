package harness

import "os"

// MemoryWorkRoot is where a bench's request dirs and pod volumes live: tmpfs
// when the machine has /dev/shm, as in a memory-backed emptyDir. The
// suite's VMs have an ext4 root without a journal, on which every file
// creation scans the inodes deleted in the last seconds (the kernel's
// recently_deleted): a plugin server unpacking thousands of files per second
// there spends most of its CPU in that scan, which a journaled node disk
// does not have (docs/performance.md, "Through the whole Argo CD").
func MemoryWorkRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}
