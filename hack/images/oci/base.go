package oci

// Users of every image, as distroless static has them plus Argo CD's 999
// (the cmp-server image is also the copy init container, which runs as 999).
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
		"argocd:x:999:999:argocd:/home/argocd:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\nargocd:x:999:\n"
)

// Base is what every image holds besides its own files: passwd and group, a
// sticky /tmp and the non-root users' homes.
func Base() []Entry {
	return []Entry{
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "etc/group", Mode: 0o644, Data: []byte(group)},
		dirEntry("tmp", 0o1777, 0),
		dirEntry("home/nonroot", 0o700, 65532),
		// Group 0 with the owner's rights, as Argo CD's own image has it:
		// OpenShift runs every container of a pod as the namespace's UID in
		// group 0, and the plugin sockets and config are mounted below this
		// directory (a sidecar as UID 1000680000 could not read its
		// plugin.yaml through a 0700 home of 999's).
		groupDir("home/argocd", 0o770, 999, 0),
	}
}
