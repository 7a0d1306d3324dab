package cli

import "fmt"

// Count is n with its noun in the number it needs: "1 item", "0 items", "2 items". Every count
// the CLI writes in a sentence goes through it (a review found "1 items dead-lettered"); the
// nouns it is given take a plain -s.
func Count[N ~int | ~int32 | ~int64](n N, noun string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
