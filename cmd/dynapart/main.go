// Command dynapart shares the processing of a DynamoDB table among N workers, exactly once.
//
// Run `dynapart --help` for the commands, and `dynapart COMMAND --help` for each one's flags.
// Every flag can also be set as DYNAPART_<FLAG> in the environment (e.g. DYNAPART_WORKERS=4), but
// in a command that `work --exec` runs for an item, DYNAPART_KEY (the item's key) sets no --key.
//
// The code is in internal/: the root command (root), one package per command (work, status, demo,
// initcmd, ...) and what the commands share (cli).
package main

import (
	"os"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/root"
)

func main() { os.Exit(root.Run(os.Args[1:], cli.OSStdio())) }
