package chaos

import (
	"bufio"
	"os"
	"strings"
)

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// writeLines writes every key as many times as counted, one per line.
func writeLines(path string, counts map[string]int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for k, n := range counts {
		_, _ = w.WriteString(strings.Repeat(k+"\n", n))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
