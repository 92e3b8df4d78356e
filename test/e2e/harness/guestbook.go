package harness

import (
	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// GuestbookApp is the Application the tests and the demo generate: the chart at
// apps/guestbook of testdata/repo, deployed to namespace demo, with parameters.
func GuestbookApp(kubeVersion string, ps []params.AppParameter) client.App {
	return client.App{
		Name: "guestbook", Namespace: "demo", Project: "default",
		Revision:   "0123456789abcdef0123456789abcdef01234567",
		RepoURL:    "https://git.example.com/platform/apps.git",
		SourcePath: "apps/guestbook", TargetRevision: "main",
		KubeVersion: kubeVersion, KubeAPIVersions: []string{"v1", "apps/v1"},
		Parameters: ps, HasPlugin: true,
	}
}
