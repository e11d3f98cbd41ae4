package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/tempqueues/tempqueues/internal/testkit/sqsenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// attrFlags collects repeated --attr name=value flags: String message
// attributes, each with a name and a non-empty value (SQS refuses an
// empty one).
type attrFlags map[string]string

func (a attrFlags) String() string { return fmt.Sprint(map[string]string(a)) }
func (a attrFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want name=value with a non-empty name and value, got %q", s)
	}
	a[k] = v
	return nil
}

// optionalString is a string flag whose explicit empty value means
// something (emulator --data "": in memory). parse refuses an explicit
// empty value of every other string flag.
type optionalString string

func (s *optionalString) String() string {
	if s == nil {
		return ""
	}
	return string(*s)
}
func (s *optionalString) Set(v string) error { *s = optionalString(v); return nil }

// optionalStringFlag defines an optionalString flag and returns its value.
func optionalStringFlag(fs *flag.FlagSet, name, value, usage string) *string {
	p := &value
	fs.Var((*optionalString)(p), name, usage)
	return p
}

// checkNoEmpty refuses a string flag set to "" on the command line
// (--group-id ""): leaving a flag out picks its default, while an empty
// value is almost always a script's unset variable, and passing it on
// would silently mean the default or fail later, far from its cause.
// Flags defined with optionalStringFlag may be empty.
func checkNoEmpty(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		if s, isString := g.Get().(string); isString && s == "" {
			err = usageError("--%s is empty: give it a value, or leave the flag out for its default", f.Name)
		}
	})
	return err
}

// checkServerChoice refuses server flags that contradict each other:
// --endpoint-url names an SQS-compatible server, --aws names AWS itself.
func checkServerChoice(f sqsenv.Flags) error {
	if f.EndpointURL != "" && f.AWS {
		return usageError("--endpoint-url and --aws name two different servers (an SQS-compatible endpoint, and AWS itself): pass only one")
	}
	return nil
}

// paramFlags maps the parameters the library names in an
// *sqsapi.InvalidInputError to the flags or arguments of tempq that set
// them, for the commands that do not say otherwise.
var paramFlags = map[string]string{
	"MessageBody":            "BODY",
	"Body":                   "BODY",
	"MessageAttributes":      "--attr",
	"Attributes":             "--attr",
	"MessageGroupId":         "--group-id",
	"MessageDeduplicationId": "--dedup-id",
	"DelaySeconds":           "--delay",
	"QueueUrl":               "--queue",
	"queueURL":               "--queue",
	"AllowReplyTo":           "--allow-reply-to",
	"Prefix":                 "--prefix",
}

// optionHint matches a parenthesized hint of the library's that names one
// of its Options fields.
var optionHint = regexp.MustCompile(`\s*\([^()]*\bOptions\.\w+[^()]*\)`)

// flagError turns an option or input the library rejected into a usage
// error that names the command's flag or argument, not the Go field it
// set: flags maps an *sqsapi.InvalidInputError's Param to the flag
// ("ParkingQueue" to "--parking"), before paramFlags, and the reason's
// mentions of other parameters ("exceeds MaxWorkers 2") are renamed the
// same way. Other errors are usage errors as they are.
func flagError(err error, flags map[string]string) error {
	var ie *sqsapi.InvalidInputError
	if !errors.As(err, &ie) {
		return usageError("%v", err)
	}
	// A hint to set a library option ("(set Options.PayloadStore to …)")
	// is for a Go program: the command has no such option.
	reason := optionHint.ReplaceAllString(ie.Reason, "")
	for _, m := range []map[string]string{flags, paramFlags} {
		for param, f := range m {
			// "MinWorkers/MaxWorkers" to "--min/--max": each by its own.
			ps, fs := strings.Split(param, "/"), strings.Split(f, "/")
			if len(ps) != len(fs) {
				continue
			}
			for i, p := range ps {
				reason = regexp.MustCompile(`\b`+regexp.QuoteMeta(p)+`\b`).ReplaceAllLiteralString(reason, fs[i])
			}
		}
	}
	return usageError("%s: %s", flagOf(ie.Param, flags), reason)
}

// flagOf returns the flag or argument that sets the library's parameter
// param: from flags, else from paramFlags, else the parameter's name in
// words ("IdleTimeout" reads "idle timeout"), never a Go identifier.
func flagOf(param string, flags map[string]string) string {
	if f, ok := flags[param]; ok {
		return f
	}
	if f, ok := paramFlags[param]; ok {
		return f
	}
	var b strings.Builder
	for i, r := range param {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
