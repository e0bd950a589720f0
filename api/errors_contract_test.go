package api

import (
	"context"
	"slices"
	"testing"

	"github.com/paykit/paykit/openapi/contract"
)

// Every problem code the error table can answer is in the contract's ProblemCode enum,
// and the enum has no code the table does not answer.
func TestEveryProblemCodeIsInTheContract(t *testing.T) {
	v, err := contract.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var inDoc []string
	for _, c := range v.Document().Components.Schemas["ProblemCode"].Value.Enum {
		inDoc = append(inDoc, c.(string))
	}
	for code := range statusByCode {
		if !slices.Contains(inDoc, code) {
			t.Errorf("problem code %q is not in ProblemCode", code)
		}
	}
	for _, code := range inDoc {
		if _, ok := statusByCode[code]; !ok {
			t.Errorf("ProblemCode has %q, which the error table does not answer", code)
		}
	}
}
