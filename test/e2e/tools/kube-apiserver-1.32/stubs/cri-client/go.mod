module k8s.io/cri-client

go 1.23.0
