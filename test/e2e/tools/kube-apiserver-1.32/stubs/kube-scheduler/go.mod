module k8s.io/kube-scheduler

go 1.23.0
