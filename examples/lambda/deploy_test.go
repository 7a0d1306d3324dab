package main

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// yamlPath follows mapping keys from n; nil when a key is missing.
func yamlPath(n *yaml.Node, keys ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	for _, k := range keys {
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

func mappingKeys(n *yaml.Node) []string {
	var ks []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		ks = append(ks, n.Content[i].Value)
	}
	sort.Strings(ks)
	return ks
}

// TestDeploymentTemplate: template.yaml is well-formed, configures the function with exactly the
// variables configFromEnv reads, and substitutes every ${X} of the state machine definition.
func TestDeploymentTemplate(t *testing.T) {
	raw, err := os.ReadFile("template.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	fn := yamlPath(&doc, "Resources", "WorkerFunction", "Properties")
	require.NotNil(t, fn)
	env := []string{"DYNAPART_JOB", "DYNAPART_LEASE_TABLE", "DYNAPART_MODE", "DYNAPART_TABLE", "DYNAPART_WORKERS"}
	require.Equal(t, env, mappingKeys(yamlPath(fn, "Environment", "Variables")))
	require.Equal(t, "backfill", yamlPath(fn, "Environment", "Variables", "DYNAPART_MODE").Value)
	require.Equal(t, "bootstrap", yamlPath(fn, "Handler").Value)
	require.Equal(t, "provided.al2023", yamlPath(fn, "Runtime").Value)

	// The stream tail: the same binary in stream mode, invoked by the table's stream with partial
	// batch responses, allowed to read the stream.
	st := yamlPath(&doc, "Resources", "StreamFunction", "Properties")
	require.NotNil(t, st)
	require.Equal(t, env, mappingKeys(yamlPath(st, "Environment", "Variables")))
	require.Equal(t, "stream", yamlPath(st, "Environment", "Variables", "DYNAPART_MODE").Value)
	ev := yamlPath(st, "Events", "Changes", "Properties")
	require.NotNil(t, ev)
	require.Equal(t, "DynamoDB", yamlPath(st, "Events", "Changes", "Type").Value)
	require.Equal(t, "ReportBatchItemFailures", yamlPath(ev, "FunctionResponseTypes").Content[0].Value)
	require.Contains(t, string(raw), "dynamodb:GetRecords")

	sm := yamlPath(&doc, "Resources", "WorkerLoop", "Properties")
	require.NotNil(t, sm)
	def, err := os.ReadFile(yamlPath(sm, "DefinitionUri").Value)
	require.NoError(t, err)
	var used []string
	for _, m := range regexp.MustCompile(`\$\{(\w+)\}`).FindAllStringSubmatch(string(def), -1) {
		used = append(used, m[1])
	}
	subs := mappingKeys(yamlPath(sm, "DefinitionSubstitutions"))
	for _, u := range used {
		require.Contains(t, subs, u, "the template substitutes ${%s}", u)
	}
}

type aslState struct {
	Type          string `json:"Type"`
	Next          string `json:"Next"`
	Default       string `json:"Default"`
	End           bool   `json:"End"`
	Choices       []struct{ Next string }
	Catch         []struct{ Next string }
	ItemProcessor *aslMachine `json:"ItemProcessor"`
}

type aslMachine struct {
	StartAt string              `json:"StartAt"`
	States  map[string]aslState `json:"States"`
}

// check: StartAt and every transition name a state, every state ends or moves on.
func (m *aslMachine) check(t *testing.T) {
	require.Contains(t, m.States, m.StartAt)
	for name, s := range m.States {
		targets := []string{s.Next, s.Default}
		for _, c := range s.Choices {
			targets = append(targets, c.Next)
		}
		for _, c := range s.Catch {
			targets = append(targets, c.Next)
		}
		for _, n := range targets {
			if n != "" {
				require.Contains(t, m.States, n, "state %s moves to %s", name, n)
			}
		}
		terminal := s.End || s.Type == "Succeed" || s.Type == "Fail" || s.Type == "Choice"
		require.True(t, terminal || s.Next != "", "state %s neither ends nor moves on", name)
		if s.ItemProcessor != nil {
			s.ItemProcessor.check(t)
		}
	}
}

// TestStateMachineDefinition: the definition is JSON before and after substitution, its
// transitions are consistent, and it loops until an answer says finished.
func TestStateMachineDefinition(t *testing.T) {
	raw, err := os.ReadFile("statemachine.asl.json")
	require.NoError(t, err)
	require.True(t, json.Valid(raw))
	substituted := regexp.MustCompile(`\$\{\w+\}`).ReplaceAll(raw, []byte("3"))
	var m aslMachine
	require.NoError(t, json.Unmarshal(substituted, &m))
	m.check(t)
	require.Equal(t, "Map", m.States["InvokeWorkers"].Type)
	require.Equal(t, "InvokeWorkers", m.States["Pause"].Next, "the loop goes round")
	require.Contains(t, string(raw), `"finished.$": "$.Payload.finished"`, "reads the handler's Result.finished")
}
