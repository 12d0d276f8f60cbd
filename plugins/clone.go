package plugins

import (
	"reflect"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
)

// cloneValue deep-copies a phase value so that each plugin gets its own copy:
// in-place mutation, by a plugin or by a straggler after its deadline, can
// never reach the runtime's value or the next plugin. The known phase types
// are copied by hand (cheap); JSON-like data inside them is walked; anything
// else falls back to a reflective copy.
func cloneValue(v any) any {
	switch x := v.(type) {
	case *model.Message:
		m := cloneMessage(*x)
		return &m
	case *model.Request:
		return cloneRequest(x)
	case *model.Response:
		r := *x
		r.Message = cloneMessage(x.Message)
		return &r
	case *session.Event:
		return cloneEvent(x)
	case *Turn:
		t := *x
		t.Input = cloneMessagePtr(x.Input)
		t.Output = cloneMessagePtr(x.Output)
		return &t
	case *Failure:
		f := *x
		return &f
	case *ToolInvocation:
		t := *x
		t.Call.Args = cloneMap(x.Call.Args)
		return &t
	case map[string]any:
		return cloneMap(x)
	}
	return cloneAny(v)
}

func cloneRequest(x *model.Request) *model.Request {
	r := *x
	if x.Messages != nil {
		r.Messages = make([]model.Message, len(x.Messages))
		for i := range x.Messages {
			r.Messages[i] = cloneMessage(x.Messages[i])
		}
	}
	if x.Tools != nil {
		r.Tools = make([]model.ToolDeclaration, len(x.Tools))
		for i, t := range x.Tools {
			t.Parameters = cloneMap(t.Parameters)
			r.Tools[i] = t
		}
	}
	r.OutputSchema = cloneMap(x.OutputSchema)
	if x.Temperature != nil {
		t := *x.Temperature
		r.Temperature = &t
	}
	return &r
}

func cloneEvent(x *session.Event) *session.Event {
	e := *x
	e.Content = cloneMessagePtr(x.Content)
	e.Actions.StateDelta = cloneMap(x.Actions.StateDelta)
	if x.Usage != nil {
		u := *x.Usage
		e.Usage = &u
	}
	e.Workflow = cloneMap(x.Workflow)
	return &e
}

func cloneMessagePtr(m *model.Message) *model.Message {
	if m == nil {
		return nil
	}
	c := cloneMessage(*m)
	return &c
}

func cloneMessage(m model.Message) model.Message {
	if m.Parts == nil {
		return m
	}
	parts := make([]model.Part, len(m.Parts))
	for i, p := range m.Parts {
		if p.ToolCall != nil {
			tc := *p.ToolCall
			tc.Args = cloneMap(tc.Args)
			p.ToolCall = &tc
		}
		if p.ToolResult != nil {
			tr := *p.ToolResult
			tr.Result = cloneAny(tr.Result)
			p.ToolResult = &tr
		}
		parts[i] = p
	}
	m.Parts = parts
	return m
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = cloneAny(v)
	}
	return c
}

// cloneAny copies JSON-like data directly and anything else reflectively.
func cloneAny(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64, float32, int, int64, int32, uint, uint64, uint32:
		return v
	case map[string]any:
		return cloneMap(x)
	case []any:
		if x == nil {
			return x
		}
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = cloneAny(e)
		}
		return c
	case []string:
		return append([]string(nil), x...)
	}
	return cloneReflect(reflect.ValueOf(v)).Interface()
}

// cloneReflect deep-copies maps, slices, pointers, arrays, interfaces and the
// exported fields of structs. Unexported struct fields are copied shallowly;
// funcs and channels are shared (they are rejected by the result checks
// anyway).
func cloneReflect(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(cloneReflect(v.Elem()))
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(cloneReflect(v.Elem()))
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			c.SetMapIndex(it.Key(), cloneReflect(it.Value()))
		}
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(cloneReflect(v.Index(i)))
		}
		return c
	case reflect.Array:
		c := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			c.Index(i).Set(cloneReflect(v.Index(i)))
		}
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		for i := range v.NumField() {
			if c.Field(i).CanSet() {
				c.Field(i).Set(cloneReflect(v.Field(i)))
			}
		}
		return c
	}
	return v
}
