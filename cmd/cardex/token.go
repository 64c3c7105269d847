package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/internal/auth"
)

func tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Make service tokens for --service-tokens"}
	var name, role, tenant, subject, scopes string
	newCmd := &cobra.Command{
		Use:   "new --name NAME --role discover|catalog|admin [--tenant T [--subject S] [--scopes a,b]]",
		Short: "Print a new random token (on stderr, once) and its --service-tokens entry (on stdout, hashed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := auth.TokenEntry{Name: name, Role: auth.Role(role)}
			if tenant != "" {
				e.Caller = &auth.Binding{Tenant: tenant, Subject: subject, Scopes: splitList(scopes)}
			} else if subject != "" || scopes != "" {
				return fmt.Errorf("--subject and --scopes bind the token to a caller: give --tenant too")
			}
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				return err
			}
			token := base64.RawURLEncoding.EncodeToString(raw)
			e.TokenSHA256 = auth.HashToken(token)
			// The same checks as loading the file.
			if _, err := auth.NewTokens(auth.TokenFile{Tokens: []auth.TokenEntry{e}}); err != nil {
				return err
			}
			b, err := yaml.Marshal([]auth.TokenEntry{e})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "token (give it to the client; cardex keeps only its hash): %s\n", token)
			fmt.Fprintf(os.Stdout, "# add under tokens: in the --service-tokens file\n%s", b)
			return nil
		},
	}
	f := newCmd.Flags()
	f.StringVar(&name, "name", "", "names the token in the audit trail")
	f.StringVar(&role, "role", "", "discover, catalog or admin")
	f.StringVar(&tenant, "tenant", "", "discover tokens: bind the token to this tenant (the request's caller is then ignored or must match)")
	f.StringVar(&subject, "subject", "", "with --tenant: bind the subject too")
	f.StringVar(&scopes, "scopes", "", "with --tenant: the scopes the token holds, comma-separated")
	cmd.AddCommand(newCmd)
	return cmd
}
