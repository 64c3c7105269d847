package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func outcomeCmd() *cobra.Command {
	var cf clientFlags
	var who callerFlags
	var used string
	var noneFit bool
	cmd := &cobra.Command{
		Use:   "outcome DISCOVERY_ID --used SERVER/NAME | --none-fit",
		Short: "Report which tool a discovery's turn used, or that none fit (ReportOutcome)",
		Long: `Tells cardex how a turn ended, for the discovery whose discovery_id DiscoverTools returned (and
'cardex discover' prints on stderr): the tool the agent used (--used SERVER/NAME; it need not have
been in the shortlist), or --none-fit. A used tool that was not in the shortlist is a recorded miss.
The caller must be the discovery's (same --tenant and --subject) and may use the tool; the
discovery must be from the last hour.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (used == "") == !noneFit {
				return usageError("give --used SERVER/NAME or --none-fit (one of them)")
			}
			req := &pb.ReportOutcomeRequest{Caller: who.caller(), DiscoveryId: args[0]}
			if noneFit {
				req.Outcome = &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}
			} else {
				server, name, ok := strings.Cut(used, "/")
				if !ok {
					server, name = "", used
				}
				req.Outcome = &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: server, Name: name}}
			}
			client, ctx, done, err := cf.discovery(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := client.ReportOutcome(ctx, req)
			if err != nil {
				return err
			}
			if cf.output == "json" {
				return printPlainJSON(struct {
					DiscoveryID string `json:"discovery_id"`
					Miss        bool   `json:"miss"`
				}{args[0], resp.GetMiss()})
			}
			switch {
			case noneFit:
				fmt.Println("recorded: none of the shortlist fit (a miss)")
			case resp.GetMiss():
				fmt.Printf("recorded: %s was used but not in the shortlist (a miss)\n", used)
			default:
				fmt.Printf("recorded: %s was used and was in the shortlist\n", used)
			}
			return nil
		},
	}
	cf.register(cmd)
	who.register(cmd)
	cmd.Flags().StringVar(&used, "used", "", "the tool the turn used, SERVER/NAME (or NAME when it is not ambiguous)")
	cmd.Flags().BoolVar(&noneFit, "none-fit", false, "none of the shortlist fit the request")
	return cmd
}
