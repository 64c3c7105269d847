package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
)

func tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Make and remove service tokens (a --service-tokens file, or the database's service_tokens table)"}
	var name, role, tenant, subject, scopes string
	var sf storeFlags // --database-url, --database-schema
	newCmd := &cobra.Command{
		Use:   "new --name NAME --role discover|catalog|admin [--tenant T [--subject S] [--scopes a,b]] [--database-url URL]",
		Short: "Print a new random token (on stderr, once) and its --service-tokens entry (on stdout, hashed); with --database-url, add it to service_tokens instead",
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
			e.TokenSHA256 = tokens.HashToken(token)
			// The same checks as loading the file.
			if _, err := auth.NewTokens(auth.TokenFile{Tokens: []auth.TokenEntry{e}}); err != nil {
				return err
			}
			if sf.url != "" {
				st, err := sf.openPostgres(newLogger("warn"))
				if err != nil {
					return err
				}
				defer st.Close()
				if err := auth.PutDBToken(cmd.Context(), st.Pool(), st.Schema(), e); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "token (give it to the client; cardex keeps only its hash): %s\n", token)
				fmt.Fprintf(os.Stdout, "added %s (role %s) to service_tokens; replicas with --service-tokens-db accept it within %s\n", e.Name, e.Role, auth.DBRefresh)
				return nil
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
	sf.registerDatabase(newCmd)
	var dsf storeFlags
	deleteCmd := &cobra.Command{
		Use:   "delete NAME --database-url URL",
		Short: "Remove a token from the database's service_tokens table (replicas stop accepting it within 30 s)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := dsf.openPostgres(newLogger("warn"))
			if err != nil {
				return err
			}
			defer st.Close()
			ok, err := auth.DeleteDBToken(cmd.Context(), st.Pool(), st.Schema(), args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no token named %q in service_tokens", args[0])
			}
			fmt.Fprintf(os.Stdout, "deleted %s\n", args[0])
			return nil
		},
	}
	dsf.registerDatabase(deleteCmd)
	cmd.AddCommand(newCmd, deleteCmd)
	return cmd
}
