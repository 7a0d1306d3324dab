// Package follow is the table's change stream as dynapart uses it: today EnableStream, which
// `dynapart init --stream` calls to turn on a table's stream (NEW_AND_OLD_IMAGES) so that the
// stream holds every write from then on. Following the stream after a backfill (work --follow:
// leased shards, per-version handling in the ledger, the handoff from the scan) is not built yet.
package follow
