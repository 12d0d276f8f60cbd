module github.com/coreos/etcd

go 1.21
