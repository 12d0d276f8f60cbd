package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/evalengine"
)

// Typed flag values. Each keeps the contract's error code for a bad value
// ({invalid_positive_integer, samples}) and adds which flag it was and what
// is valid, so a usage error never needs --help to be understood. pflag
// wraps a Set error in an InvalidValueError, which unwraps to the cliError
// (see the root's flag error func).

// codeInvalidDuration is a --timeout-like flag that is neither a Go
// duration nor a count of milliseconds.
const codeInvalidDuration = "invalid_duration"

// posIntValue is an integer flag of at least 1. The upper bound belongs to
// the option it sets (evalengine.Options.Normalize checks it); the range is
// only named in the message.
type posIntValue struct {
	dst   *int
	name  string
	valid string // "1..100"
}

func (v *posIntValue) String() string {
	if v.dst == nil || *v.dst == 0 {
		return ""
	}
	return strconv.Itoa(*v.dst)
}

func (v *posIntValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return &cliError{Code: codeInvalidPositiveInt, Reason: optionName(v.name), Detail: fmt.Sprintf("--%s wants an integer %s, got %q", v.name, v.valid, s)}
	}
	*v.dst = n
	return nil
}

func (*posIntValue) Type() string { return "int" }

// fractionValue is a float flag in 0..1.
type fractionValue struct {
	dst  *float64
	name string
}

func (v *fractionValue) String() string {
	if v.dst == nil {
		return ""
	}
	return strconv.FormatFloat(*v.dst, 'f', -1, 64)
}

func (v *fractionValue) Set(s string) error {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || x < 0 || x > 1 {
		return &cliError{Code: codeInvalidFraction, Reason: optionName(v.name), Detail: fmt.Sprintf("--%s wants a number 0..1, got %q", v.name, s)}
	}
	*v.dst = x
	return nil
}

func (*fractionValue) Type() string { return "float" }

// boolValue is a boolean flag: --flag alone is true; --flag=false, and for
// compatibility "--flag false" (see joinBoolArgs), set it explicitly.
type boolValue struct {
	dst  *bool
	name string
}

func (v *boolValue) String() string {
	if v.dst == nil {
		return "false"
	}
	return strconv.FormatBool(*v.dst)
}

func (v *boolValue) Set(s string) error {
	switch s {
	case "true":
		*v.dst = true
	case "false":
		*v.dst = false
	default:
		return &cliError{Code: codeInvalidBoolean, Reason: optionName(v.name), Detail: fmt.Sprintf("--%s wants true or false, got %q", v.name, s)}
	}
	return nil
}

func (*boolValue) Type() string { return "bool" }

// IsBoolFlag lets pflag treat "--flag" alone as true.
func (*boolValue) IsBoolFlag() bool { return true }

// msDurationValue is a duration flag: "30s", "5m", "1h30m", or a plain
// integer, which stays milliseconds for compatibility with scripts written
// when the flag was an integer. It stores milliseconds.
type msDurationValue struct {
	dst  *int
	name string
	max  time.Duration
}

func (v *msDurationValue) String() string {
	if v.dst == nil || *v.dst == 0 {
		return ""
	}
	return (time.Duration(*v.dst) * time.Millisecond).String()
}

func (v *msDurationValue) Set(s string) error {
	d, err := parseMSDuration(s)
	if err != nil || d < time.Millisecond || d > v.max {
		return &cliError{Code: codeInvalidDuration, Reason: optionName(v.name),
			Detail: fmt.Sprintf("--%s wants a duration 1ms..%s such as 30s or 5m (a plain integer is milliseconds), got %q", v.name, v.max, s)}
	}
	*v.dst = int(d.Milliseconds())
	return nil
}

func (*msDurationValue) Type() string { return "duration" }

// parseMSDuration reads a Go duration or an integer number of milliseconds.
func parseMSDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/int64(time.Millisecond) {
			return 0, errors.New("out of range")
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(s)
}

// choiceValue is a string flag with a fixed set of values. code is the
// contract's error code for a value outside it.
type choiceValue struct {
	dst   *string
	name  string
	code  string
	valid []string
}

func (v *choiceValue) String() string {
	if v.dst == nil {
		return ""
	}
	return *v.dst
}

func (v *choiceValue) Set(s string) error {
	if !slices.Contains(v.valid, s) {
		return v.invalid(s)
	}
	*v.dst = s
	return nil
}

func (v *choiceValue) invalid(s string) error {
	// The report format's code carries the bad value ({invalid_eval_report_format, html});
	// every other choice's code carries the option, as the contract has it.
	reason := s
	if v.code != evalengine.CodeInvalidReportFormat {
		reason = optionName(v.name)
	}
	return &cliError{Code: v.code, Reason: reason, Detail: fmt.Sprintf("--%s is one of %s, got %q", v.name, strings.Join(v.valid, ", "), s)}
}

func (*choiceValue) Type() string { return "string" }

// choiceFlag registers a choice flag and completes its values in the shell.
func choiceFlag(cmd *cobra.Command, dst *string, name, code, def, usage string, valid []string) {
	*dst = def
	cmd.Flags().Var(&choiceValue{dst: dst, name: name, code: code, valid: valid}, name, usage+": "+strings.Join(valid, "|"))
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(valid, cobra.ShellCompDirectiveNoFileComp))
}

// boolLiterals are the words joinBoolArgs treats as a bool flag's value.
// "yes"/"no" are included so they get invalid_boolean naming the flag
// rather than an "unexpected argument" error.
var boolLiterals = []string{"true", "false", "yes", "no", "on", "off", "1", "0"}

// joinBoolArgs rewrites "--bool-flag true" as "--bool-flag=true". Scripts
// written when booleans were string flags pass the value as the next
// argument; a typed bool flag (--flag alone means true) would otherwise
// read that value as a positional argument.
func joinBoolArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && i+1 < len(args) && slices.Contains(boolLiterals, args[i+1]) {
			if f := lookupFlag(cmd, a[2:]); f != nil && f.Value.Type() == "bool" {
				out = append(out, a+"="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	return cmd.InheritedFlags().Lookup(name)
}

// envDefault returns the environment variable's value, else def.
func envDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
