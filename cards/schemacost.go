package cards

import (
	"errors"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema work limits. A schema is a program that AuthorizeCall runs
// on every call, written by whoever registers the card, so its cost is
// bounded before it is accepted and again before each validation.
const (
	// MaxSchemaDepth bounds the nesting of objects and arrays in a schema
	// document. Compile time grows with the cube of the nesting depth.
	MaxSchemaDepth = 64
	// MaxSchemaObjects bounds the objects in a schema document (roughly
	// its subschemas); compile time grows with their number.
	MaxSchemaObjects = 2048
	// MaxSchemaEvaluations bounds how many subschema evaluations one
	// argument value may cost, counted through $ref, allOf, anyOf, oneOf,
	// not, if/then/else and the dependent schemas, for arguments nested
	// up to MaxArgumentsDepth. $ref fan-out makes this exponential in the
	// schema's size ("#/$defs/a" → two refs to "b" → two refs to "c" ...).
	MaxSchemaEvaluations = 100_000
	// MaxArgumentsDepth bounds the nesting of a validated document
	// (AuthorizeCall's arguments).
	MaxArgumentsDepth = 64
	// MaxValidationSteps bounds the work of one validation: the sum over
	// the document's values of the evaluations a value at its depth can
	// cost.
	MaxValidationSteps = 1_000_000
)

// errNonConsumingCycle: a subschema reaches itself without descending into
// the instance, which validation could only report as an infinite loop.
var errNonConsumingCycle = errors.New("refers back to itself without descending into the instance (an infinite loop)")

// schemaCost computes, for d = 0..MaxArgumentsDepth, an upper bound on the
// subschema evaluations that validating one value at depth d below the
// root costs, along the value's path. Values saturate just above
// MaxSchemaEvaluations.
//
// The bound follows the compiled schema graph (references resolved):
// in-place applicators (allOf, anyOf, oneOf, not, if/then/else, $ref,
// $dynamicRef, $recursiveRef, dependent schemas) add their subschemas'
// costs at the same depth; child applicators (properties,
// patternProperties, additionalProperties, items, prefixItems, contains,
// unevaluated*, propertyNames, contentSchema) add their costs one level
// down, taking the dearest single property or tuple position, since one
// child value matches one name or index. A subschema whose `type` excludes
// the value's kind costs one evaluation and goes no further, as in the
// validator.
func schemaCost(root *jsonschema.Schema) ([]int64, error) {
	c := &coster{memo: map[costKey]int64{}, busy: map[costKey]bool{}}
	c.collectAnchors(root)
	c.heights(root)
	out := make([]int64, MaxArgumentsDepth+1)
	for d := range out {
		v, err := c.any(root, d)
		if err != nil {
			return nil, err
		}
		out[d] = v
	}
	return out, nil
}

const costCap = MaxSchemaEvaluations + 1

type valKind uint8

const (
	valObject valKind = iota
	valArray
	valOther
)

type costKey struct {
	s *jsonschema.Schema
	d int
	k valKind
}

type coster struct {
	memo      map[costKey]int64
	busy      map[costKey]bool
	dynamic   map[string][]*jsonschema.Schema // $dynamicAnchor name → schemas
	recursive []*jsonschema.Schema            // $recursiveAnchor: true
	// height is how many levels below a schema its child applicators can
	// reach (MaxArgumentsDepth when it recurses): deeper, the cost no
	// longer grows, which keeps the table small.
	height map[*jsonschema.Schema]int
}

func add(a, b int64) int64 { return min(a+b, costCap) }

// any is the cost of a value of unknown kind at depth d.
func (c *coster) any(s *jsonschema.Schema, d int) (int64, error) {
	var best int64
	for _, k := range []valKind{valObject, valArray, valOther} {
		v, err := c.cost(s, d, k)
		if err != nil {
			return 0, err
		}
		best = max(best, v)
	}
	return best, nil
}

// below is the cost of a child value: one level down, any kind. A child
// below the depth limit costs nothing: such documents are refused.
func (c *coster) below(s *jsonschema.Schema, d int) (int64, error) {
	if s == nil || d == 0 {
		return 0, nil
	}
	return c.any(s, d-1)
}

func admits(s *jsonschema.Schema, k valKind) bool {
	if s.Types == nil || s.Types.IsEmpty() {
		return true
	}
	for _, t := range s.Types.ToStrings() {
		switch {
		case t == "object" && k == valObject, t == "array" && k == valArray:
			return true
		case t != "object" && t != "array" && k == valOther:
			return true
		}
	}
	return false
}

func (c *coster) cost(s *jsonschema.Schema, d int, k valKind) (int64, error) {
	if s == nil {
		return 0, nil
	}
	d = min(d, c.height[s])
	key := costKey{s, d, k}
	if v, ok := c.memo[key]; ok {
		return v, nil
	}
	if c.busy[key] {
		return 0, errNonConsumingCycle
	}
	c.busy[key] = true
	defer delete(c.busy, key)

	total := int64(1)
	if s.Bool != nil || !admits(s, k) {
		c.memo[key] = total
		return total, nil
	}
	var err error
	same := func(x *jsonschema.Schema) {
		if err != nil || x == nil {
			return
		}
		var v int64
		v, err = c.cost(x, d, k)
		total = add(total, v)
	}
	child := func(x *jsonschema.Schema) int64 {
		if err != nil {
			return 0
		}
		var v int64
		v, err = c.below(x, d)
		return v
	}

	// In place: the same value.
	same(s.Ref)
	same(s.Not)
	for _, x := range slices.Concat(s.AllOf, s.AnyOf, s.OneOf) {
		same(x)
	}
	same(s.If)
	same(s.Then)
	same(s.Else)
	if s.RecursiveRef != nil {
		same(s.RecursiveRef)
		for _, x := range c.recursive {
			same(x)
		}
	}
	if s.DynamicRef != nil {
		same(s.DynamicRef.Ref)
		for _, x := range c.dynamic[s.DynamicRef.Anchor] {
			same(x)
		}
	}
	if k == valObject {
		for _, x := range sortedSchemas(s.DependentSchemas) {
			same(x)
		}
		for _, name := range sortedKeys(s.Dependencies) {
			if x, ok := s.Dependencies[name].(*jsonschema.Schema); ok {
				same(x)
			}
		}
	}

	// One level down: a child value.
	switch k {
	case valObject:
		var dearest int64
		for _, x := range sortedSchemas(s.Properties) {
			dearest = max(dearest, child(x))
		}
		total = add(total, dearest)
		for _, x := range s.PatternProperties {
			total = add(total, child(x))
		}
		if x, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			total = add(total, child(x))
		}
		total = add(total, child(s.UnevaluatedProperties))
		total = add(total, child(s.PropertyNames))
	case valArray:
		var dearest int64
		tuple := s.PrefixItems
		if xs, ok := s.Items.([]*jsonschema.Schema); ok {
			tuple = append(slices.Clone(tuple), xs...)
		}
		for _, x := range tuple {
			dearest = max(dearest, child(x))
		}
		total = add(total, dearest)
		if x, ok := s.Items.(*jsonschema.Schema); ok {
			total = add(total, child(x))
		}
		if x, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			total = add(total, child(x))
		}
		total = add(total, child(s.Items2020))
		total = add(total, child(s.Contains))
		total = add(total, child(s.UnevaluatedItems))
	case valOther:
		total = add(total, child(s.ContentSchema))
	}
	if err != nil {
		return 0, err
	}
	c.memo[key] = total
	return total, nil
}

// collectAnchors finds every schema a $dynamicRef or $recursiveRef could
// land on at run time (they resolve by the dynamic scope, so the bound
// counts every candidate).
func (c *coster) collectAnchors(root *jsonschema.Schema) {
	c.dynamic = map[string][]*jsonschema.Schema{}
	seen := map[*jsonschema.Schema]bool{}
	var walk func(s *jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if s.DynamicAnchor != "" {
			c.dynamic[s.DynamicAnchor] = append(c.dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			c.recursive = append(c.recursive, s)
		}
		same, child := c.edges(s)
		for _, x := range slices.Concat(same, child) {
			walk(x)
		}
	}
	walk(root)
}

// edges lists the schemas s applies to the same value and to child values.
func (c *coster) edges(s *jsonschema.Schema) (same, child []*jsonschema.Schema) {
	same = slices.Concat([]*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else},
		s.AllOf, s.AnyOf, s.OneOf, sortedSchemas(s.DependentSchemas))
	if s.RecursiveRef != nil {
		same = append(same, c.recursive...)
	}
	if s.DynamicRef != nil {
		same = append(append(same, s.DynamicRef.Ref), c.dynamic[s.DynamicRef.Anchor]...)
	}
	for _, name := range sortedKeys(s.Dependencies) {
		if x, ok := s.Dependencies[name].(*jsonschema.Schema); ok {
			same = append(same, x)
		}
	}
	child = slices.Concat([]*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema}, s.PrefixItems, sortedSchemas(s.Properties))
	for _, x := range s.PatternProperties {
		child = append(child, x)
	}
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch x := v.(type) {
		case *jsonschema.Schema:
			child = append(child, x)
		case []*jsonschema.Schema:
			child = append(child, x...)
		}
	}
	isNil := func(x *jsonschema.Schema) bool { return x == nil }
	return slices.DeleteFunc(same, isNil), slices.DeleteFunc(child, isNil)
}

// heights fills c.height for every schema reachable from root: schemas on
// a cycle, and those that reach one, recurse (MaxArgumentsDepth).
// Strongly connected components by Tarjan's algorithm; each component is
// finished after every component it reaches.
func (c *coster) heights(root *jsonschema.Schema) {
	c.height = map[*jsonschema.Schema]int{}
	index := map[*jsonschema.Schema]int{}
	low := map[*jsonschema.Schema]int{}
	onStack := map[*jsonschema.Schema]bool{}
	var stack []*jsonschema.Schema
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		index[s], low[s] = len(index), len(index)
		stack = append(stack, s)
		onStack[s] = true
		same, child := c.edges(s)
		for _, x := range slices.Concat(same, child) {
			if _, ok := index[x]; !ok {
				visit(x)
				low[s] = min(low[s], low[x])
			} else if onStack[x] {
				low[s] = min(low[s], index[x])
			}
		}
		if low[s] != index[s] {
			return
		}
		var comp []*jsonschema.Schema
		for {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[x] = false
			comp = append(comp, x)
			if x == s {
				break
			}
		}
		h := 0
		cyclic := len(comp) > 1
		for _, x := range comp {
			same, child := c.edges(x)
			for _, y := range same {
				cyclic = cyclic || y == x
				if !slices.Contains(comp, y) {
					h = max(h, c.height[y])
				}
			}
			for _, y := range child {
				cyclic = cyclic || y == x
				if !slices.Contains(comp, y) {
					h = max(h, c.height[y]+1)
				}
			}
		}
		if cyclic {
			h = MaxArgumentsDepth
		}
		for _, x := range comp {
			c.height[x] = min(h, MaxArgumentsDepth)
		}
	}
	visit(root)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedSchemas(m map[string]*jsonschema.Schema) []*jsonschema.Schema {
	out := make([]*jsonschema.Schema, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// validationSteps bounds the evaluations of validating a document whose
// values per depth are perDepth.
func validationSteps(cost []int64, perDepth []int) int64 {
	var total int64
	for d, n := range perDepth {
		if d >= len(cost) {
			return MaxValidationSteps + 1
		}
		total += int64(n) * cost[d]
		if total > MaxValidationSteps {
			return total
		}
	}
	return total
}

var errSchemaCost = fmt.Errorf("can take more than %d subschema evaluations for one argument value (counted through $ref, allOf, anyOf, oneOf, not and if/then/else, for arguments nested up to %d levels); the limit is %d",
	MaxSchemaEvaluations, MaxArgumentsDepth, MaxSchemaEvaluations)
