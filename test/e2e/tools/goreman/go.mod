// Separate module so the project's go.mod never requires goreman, the process
// manager Argo CD's own end-to-end fixture asks (`goreman run status`) which of
// Argo CD's processes run (make e2e-argo). The checksum database does not list
// goreman (its lookup answers 404), so this go.sum is what pins its content.
module github.com/cmp-injector/cmp-injector/test/e2e/tools/goreman

go 1.26

require github.com/mattn/goreman v0.3.16

require (
	github.com/joho/godotenv v1.5.1 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.27.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
