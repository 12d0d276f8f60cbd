package evalengine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/evalengine"
)

// scriptedUser says its lines in order, then done.
type scriptedUser struct {
	lines []any
	seen  []evalengine.SimulationView
}

func (u *scriptedUser) NextTurn(_ context.Context, v evalengine.SimulationView) (evalengine.UserTurn, error) {
	u.seen = append(u.seen, v)
	if v.Step >= len(u.lines) {
		return evalengine.UserTurn{Done: true}, nil
	}
	return evalengine.UserTurn{Input: u.lines[v.Step]}, nil
}

// userFunc adapts a function to UserSimulator.
type userFunc func(ctx context.Context, v evalengine.SimulationView) (evalengine.UserTurn, error)

func (f userFunc) NextTurn(ctx context.Context, v evalengine.SimulationView) (evalengine.UserTurn, error) {
	return f(ctx, v)
}

// ledger is an environment that records effects and answers with a count.
type ledger struct{ effects []any }

func (l *ledger) HandleEffect(_ context.Context, effect any, _ evalengine.SimulationView) (any, error) {
	l.effects = append(l.effects, effect)
	return map[string]any{"recorded": len(l.effects)}, nil
}

func agentSession(t *testing.T, script map[string]evalengine.TurnOutput) evalengine.Session {
	t.Helper()
	s, err := (&fakeAdapter{script: script, echo: true}).NewSession(context.Background(), evalengine.SampleInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simOpts(mod func(*evalengine.SimulationOptions)) evalengine.SimulationOptions {
	o := evalengine.DefaultSimulationOptions()
	if mod != nil {
		mod(&o)
	}
	return o
}

func TestSimulation_BoundedUserAndEnvironment(t *testing.T) {
	t.Run("user, agent and environment", func(t *testing.T) {
		user := &scriptedUser{lines: []any{"refund order 7", "thanks"}}
		env := &ledger{}
		agent := agentSession(t, map[string]evalengine.TurnOutput{
			"refund order 7": {Output: "Refund issued.", Trajectory: []evalengine.ToolStep{{Kind: "tool_call", Tool: "refund", CallID: "c1", Args: map[string]any{"order": 7}}}},
		})
		res, err := evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: user, Environment: env, Agent: agent, Options: simOpts(nil)},
			map[string]any{"persona": "customer", "environment": map[string]any{"orders": []any{7}}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Done || res.Steps != 2 || len(res.Transcript) != 5 || len(env.effects) != 1 {
			t.Fatalf("result %+v effects %v", res, env.effects)
		}
		roles := []string{}
		for _, e := range res.Transcript {
			roles = append(roles, e.Role)
		}
		if strings.Join(roles, ",") != "user,agent,environment,user,agent" {
			t.Fatalf("roles %v", roles)
		}
		// The user saw the environment's observation before its second turn.
		if last := user.seen[1].Transcript; len(last) != 3 || last[2].Role != "environment" {
			t.Fatalf("user's view %+v", last)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("result is not plain JSON: %v", err)
		}
	})

	t.Run("step ceiling", func(t *testing.T) {
		calls := 0
		forever := userFunc(func(context.Context, evalengine.SimulationView) (evalengine.UserTurn, error) {
			calls++
			return evalengine.UserTurn{Input: "again"}, nil
		})
		_, err := evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: forever, Agent: agentSession(t, nil),
			Options: simOpts(func(o *evalengine.SimulationOptions) { o.MaxSteps = 2 })}, nil)
		wantCode(t, err, evalengine.CodeSimulationStepLimit)
		if calls != 3 {
			t.Fatalf("user asked %d times, want 2 turns then the refused third", calls)
		}
	})

	t.Run("callback deadline", func(t *testing.T) {
		slow := userFunc(func(ctx context.Context, _ evalengine.SimulationView) (evalengine.UserTurn, error) {
			<-ctx.Done()
			return evalengine.UserTurn{Input: "late"}, nil
		})
		start := time.Now()
		_, err := evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: slow, Agent: agentSession(t, nil),
			Options: simOpts(func(o *evalengine.SimulationOptions) { o.CallbackTimeoutMS = 20 })}, nil)
		wantCode(t, err, evalengine.CodeSimulatorCallbackTimeout)
		if time.Since(start) > 5*time.Second {
			t.Fatal("deadline not enforced")
		}
	})

	t.Run("failures are typed", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			user evalengine.UserSimulator
			code string
		}{
			{"error", userFunc(func(context.Context, evalengine.SimulationView) (evalengine.UserTurn, error) {
				return evalengine.UserTurn{}, errors.New("no")
			}), evalengine.CodeUserSimulatorFailed},
			{"panic", userFunc(func(context.Context, evalengine.SimulationView) (evalengine.UserTurn, error) { panic("x") }), evalengine.CodeSimulatorCallbackFailed},
			{"opaque turn", userFunc(func(context.Context, evalengine.SimulationView) (evalengine.UserTurn, error) {
				return evalengine.UserTurn{Input: make(chan int)}, nil
			}), evalengine.CodeUserSimulatorFailed},
			{"oversized turn", userFunc(func(context.Context, evalengine.SimulationView) (evalengine.UserTurn, error) {
				return evalengine.UserTurn{Input: strings.Repeat("x", 200)}, nil
			}), evalengine.CodeUserSimulatorFailed},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: tc.user, Agent: agentSession(t, nil),
					Options: simOpts(func(o *evalengine.SimulationOptions) { o.MaxValueBytes = 100 })}, nil)
				wantCode(t, err, tc.code)
			})
		}
	})
}

func TestSimulation_StrictModuleAndValueBoundaries(t *testing.T) {
	agent := agentSession(t, nil)
	_, err := evalengine.RunSimulation(context.Background(), evalengine.Simulation{Agent: agent, Options: simOpts(nil)}, nil)
	wantCode(t, err, evalengine.CodeSimulatorMissingCallback)
	_, err = evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: &scriptedUser{}, Agent: agent, Options: simOpts(nil)},
		map[string]any{"pid": make(chan int)})
	wantCode(t, err, evalengine.CodeInvalidSimulationScenario)
	_, err = evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: &scriptedUser{}, Agent: agent, Options: simOpts(nil)},
		map[string]any{"environment": map[string]any{}})
	wantCode(t, err, evalengine.CodeEnvironmentNotConfigured)
	_, err = evalengine.RunSimulation(context.Background(), evalengine.Simulation{User: &scriptedUser{}, Agent: agent,
		Options: simOpts(func(o *evalengine.SimulationOptions) { o.MaxSteps = 1001 })}, nil)
	wantCode(t, err, evalengine.CodeInvalidSimulationOptions)

	_, err = evalengine.ParseSimulationOptions(map[string]any{"max_steps": 2, "modules": "x"})
	wantCode(t, err, evalengine.CodeUnknownSimulationOptions)
	_, err = evalengine.ParseSimulationOptions(map[string]any{"callback_timeout_ms": 30_001})
	wantCode(t, err, evalengine.CodeInvalidSimulationOptions)
	o, err := evalengine.ParseSimulationOptions(map[string]any{"max_steps": 2, "max_heap_words": 524_288, "context": map[string]any{"k": 1}})
	if err != nil || o.MaxSteps != 2 || o.CallbackTimeoutMS != 1000 || o.Context["k"] != 1 {
		t.Fatalf("options %+v %v", o, err)
	}
}

func TestSimulation_LLMUserDrivesAScenarioCase(t *testing.T) {
	var calls atomic.Int64
	var lastPrompt atomic.Value
	p := funcProvider(func(_ context.Context, req *model.Request) (*model.Response, error) {
		lastPrompt.Store(req.Messages[1].Text())
		if req.Temperature == nil || *req.Temperature != 0 || req.OutputSchema == nil {
			return nil, &model.Error{Provider: "test", Class: model.ClassClient}
		}
		if calls.Add(1) == 1 {
			return textResponse(`{"done":false,"message":"Weather in Pune?"}`), nil
		}
		return textResponse(`{"done":true,"message":""}`), nil
	})
	env := injected(p)
	scenarios := &evalengine.ScenarioAdapter{
		Agent: &fakeAdapter{script: map[string]evalengine.TurnOutput{
			"Weather in Pune?": {Output: "Sunny", Metadata: usage(3, 4), Trajectory: []evalengine.ToolStep{{Kind: "tool_call", Tool: "weather", Args: map[string]any{"city": "Pune"}}}},
		}},
		NewUser: evalengine.LLMUserFactory(evalengine.LLMUserConfig{}, env),
		Options: simOpts(func(o *evalengine.SimulationOptions) { o.CallbackTimeoutMS = 10_000 }),
	}
	set := mustSet(t, `{"id":"scenarios","version":"1","cases":[{"id":"pune",
		"expected_trajectory":[{"tool":"weather","args":{"city":"Pune"}}],"expected_final_response":"Sunny",
		"turns":[{"input":{"persona":"a traveller","goal":"learn the weather in Pune"}}]}]}`)
	cost, _ := evalengine.NewBuiltinMetric("cost", evalengine.ScopeCase, 1, map[string]any{"metric": "cost", "input_microunits_per_million": 1})
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: scenarios,
		Metrics: []evalengine.Metric{
			mustCriterion(t, "response", "exact_response", 1, nil),
			mustCriterion(t, "trajectory", "tool_trajectory", 1, nil),
			cost,
		},
		Options: opts(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Cases[0].Samples[0]
	if !res.Passed || s.Status != "passed" {
		t.Fatalf("scenario case: %+v", s)
	}
	sim := s.Turns[0].AdapterMetadata["simulation"].(map[string]any)
	if sim["steps"] != 1 || sim["done"] != true {
		t.Fatalf("simulation metadata %v", sim)
	}
	if prompt, _ := lastPrompt.Load().(string); !strings.Contains(prompt, "Sunny") || !strings.Contains(prompt, "a traveller") {
		t.Fatalf("user simulator did not see the transcript: %s", prompt)
	}

	// A scenario without persona and goal fails the sample, not the run.
	bad := mustSet(t, `{"id":"scenarios","version":"1","cases":[{"id":"x","turns":[{"input":"just text"}]}]}`)
	res, err = evalengine.Run(context.Background(), bad, evalengine.RunConfig{Adapter: scenarios, Metrics: evalengine.DefaultCriteria(), Options: opts(nil)})
	if err != nil || res.Cases[0].Samples[0].Error != evalengine.CodeInvalidSimulationScenario {
		t.Fatalf("bad scenario: %v %+v", err, res)
	}

	_, err = evalengine.NewLLMUser(evalengine.LLMUserConfig{Persona: "p"}, env)
	wantCode(t, err, evalengine.CodeLLMUser)
	u, _ := evalengine.NewLLMUser(evalengine.LLMUserConfig{Persona: "p", Goal: "g"}, injected(funcProvider(
		func(context.Context, *model.Request) (*model.Response, error) {
			return textResponse(`{"done":false,"message":"hi","mood":"angry"}`), nil
		})))
	_, err = u.NextTurn(context.Background(), evalengine.SimulationView{})
	if evalengine.ErrorReason(err) != evalengine.LLMUserInvalidOutput {
		t.Fatalf("extra key: %v", err)
	}
}
