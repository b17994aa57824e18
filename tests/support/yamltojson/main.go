// Reads a JSON array of YAML documents on stdin and writes a JSON array with, for each, what
// kubectl's converter makes of it: {"json": <value>} or {"error": "<message>"}.
package main

import (
	"encoding/json"
	"os"

	"sigs.k8s.io/yaml"
)

type result struct {
	JSON  json.RawMessage `json:"json,omitempty"`
	Error string          `json:"error,omitempty"`
}

func main() {
	var docs []string
	if err := json.NewDecoder(os.Stdin).Decode(&docs); err != nil {
		panic(err)
	}
	out := make([]result, len(docs))
	for i, doc := range docs {
		converted, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			out[i].Error = err.Error()
		} else {
			out[i].JSON = converted
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		panic(err)
	}
}
