// Command validate-token asks the svc sidecar whether a bearer token is
// valid and prints the answer: the smallest program that uses the Go
// client, the one docs/go.md installs in a new module.
//
//	make run                  # the sidecar, in another terminal
//	go run ./examples/validate-token anything
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/svc-dev/svc/authz"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: validate-token <token>")
	}
	// "": the address from SVC_SIDECAR_ADDR, then sdk.sidecar_addr of
	// ./svc.toml, else [::1]:50051. FailClosed: an unreachable sidecar is
	// an error here, not an anonymous user.
	client, err := authz.NewClient("", authz.ClientOptions{FailMode: authz.FailClosed})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	d, err := client.ValidateToken(context.Background(), os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("allowed=%t reason=%s subject=%q tenant=%q\n", d.Allowed, d.Reason, d.Subject, d.TenantID)
}
