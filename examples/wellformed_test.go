// Package examples_test checks what the examples ship besides Go code: every JSON and YAML file
// under examples/ is well-formed, every example has a README.md, and every example with a Go
// program has a test.
package examples_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigFilesAreWellFormed(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, rerr := os.ReadFile(path)
		switch strings.ToLower(filepath.Ext(path)) {
		case ".json":
			n++
			require.NoError(t, rerr)
			require.True(t, json.Valid(raw), "%s is not valid JSON", path)
		case ".yaml", ".yml":
			n++
			require.NoError(t, rerr)
			var doc yaml.Node
			require.NoError(t, yaml.Unmarshal(raw, &doc), path)
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 4, "policy.json, task-definition.json, template.yaml, statemachine.asl.json at least")
}

func TestEveryExampleHasAReadme(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" {
			continue
		}
		_, err := os.Stat(filepath.Join(e.Name(), "README.md"))
		require.NoError(t, err, "examples/%s has no README.md", e.Name())
	}
}

func TestEveryProgramHasATest(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	programs := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" {
			continue
		}
		code, _ := filepath.Glob(filepath.Join(e.Name(), "*.go"))
		tests, _ := filepath.Glob(filepath.Join(e.Name(), "*_test.go"))
		if len(code) > len(tests) {
			programs++
			require.NotEmpty(t, tests, "examples/%s has Go code and no test", e.Name())
		}
	}
	require.GreaterOrEqual(t, programs, 6, "push, files, interviewers, receipts, transform, lambda at least")
}
