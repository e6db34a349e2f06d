// Command etcd is the etcd server of go.etcd.io/etcd/server/v3, built from
// this module because the upstream main package lives in another module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
