// Command cardex is the capability-card retrieval service and its CLI.
// This file only dispatches; each subcommand lives in its own file.
package main

import (
	"fmt"
	"os"

	"google.golang.org/grpc/status"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		msg := err.Error()
		if st, ok := status.FromError(err); ok {
			// The server's message, without gRPC's "rpc error: code = ..." frame.
			msg = st.Message()
		}
		fmt.Fprintln(os.Stderr, "cardex:", msg)
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		os.Exit(1)
	}
}
