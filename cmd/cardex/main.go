// Command cardex is the capability-card retrieval service and its CLI.
// This file only dispatches; each subcommand lives in its own file.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cardex:", err)
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		os.Exit(1)
	}
}
