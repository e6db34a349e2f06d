// Command csi-node-registrar registers a CSI node plugin with the kubelet,
// as node-driver-registrar does (same flags, same socket names): it asks the
// plugin's CSI socket for its name (GetPluginInfo), then serves the kubelet's
// plugin-registration API (k8s.io/kubelet pluginregistration/v1) on
// <plugin-registration-path>/<name>-reg.sock, answering GetInfo with the
// plugin's socket path as the kubelet sees it.
//
// pillar's cluster tests build it because the Go module proxy they can reach
// does not serve github.com/kubernetes-csi/node-driver-registrar.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	failed         chan string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	log.Printf("kubelet asked for the plugin info: %s at %s", r.name, r.endpoint)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("registered with the kubelet")
	} else {
		r.failed <- s.Error
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// driverName asks the CSI socket for the plugin's name, retrying until the
// plugin answers (it may start after this container).
func driverName(ctx context.Context, address string) (string, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	client := csi.NewIdentityClient(conn)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		info, err := client.GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil && info.GetName() != "" {
			return info.GetName(), nil
		}
		log.Printf("waiting for the CSI plugin at %s: %v", address, err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func main() {
	csiAddress := flag.String("csi-address", "/run/csi/socket", "the CSI plugin's socket inside this container")
	kubeletPath := flag.String("kubelet-registration-path", "", "the CSI plugin's socket as the kubelet sees it (on the host)")
	regDir := flag.String("plugin-registration-path", "/registration", "the kubelet's plugins_registry directory inside this container")
	_ = flag.Int("v", 0, "log verbosity (accepted for node-driver-registrar's command line; ignored)")
	flag.Parse()
	if *kubeletPath == "" {
		fmt.Fprintln(os.Stderr, "--kubelet-registration-path is required")
		os.Exit(2)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	name, err := driverName(ctx, *csiAddress)
	if err != nil {
		log.Fatalf("no plugin name from %s: %v", *csiAddress, err)
	}
	sock := filepath.Join(*regDir, name+"-reg.sock")
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		log.Fatalf("removing the old socket %s: %v", sock, err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatalf("listening on %s: %v", sock, err)
	}
	r := &registrar{name: name, endpoint: *kubeletPath, failed: make(chan string, 1)}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	go func() {
		if err := srv.Serve(lis); err != nil {
			log.Printf("serving %s: %v", sock, err)
		}
	}()
	log.Printf("serving the registration of %s on %s (plugin socket %s)", name, sock, *kubeletPath)

	code := 0
	select {
	case <-ctx.Done():
		log.Printf("stopping")
	case msg := <-r.failed:
		// The kubelet refused the plugin: exit, so the container restarts
		// and registers again.
		log.Printf("the kubelet refused the registration: %s", msg)
		code = 1
	}
	srv.Stop()
	_ = os.Remove(sock)
	os.Exit(code)
}
