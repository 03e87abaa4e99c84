package config

import (
	"fmt"
	"regexp"
	"strings"
)

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Bounds of a stdio backend's command and environment.
const (
	MaxCommandArgs = 256
	MaxEnvVars     = 256
)

// validateStdio checks a stdio backend (command): it is a command or a URL,
// never both, and what is meaningful for HTTP only (headers, auth, a
// Modern pin) is refused. Nothing is quoted: an argument or a variable
// may hold a secret.
func (b Backend) validateStdio(at string) []error {
	var errs []error
	switch {
	case b.URL != "":
		errs = append(errs, keyErr(at+".command", "and url are two kinds of backend: give one"))
	case len(b.Command) == 0 || b.Command[0] == "":
		errs = append(errs, keyErr(at+".command", "is required with env or dir: the program to run, and its arguments"))
	case len(b.Command) > MaxCommandArgs:
		errs = append(errs, keyErr(at+".command", "has more than %d arguments", MaxCommandArgs))
	}
	if len(b.Env) > MaxEnvVars {
		errs = append(errs, keyErr(at+".env", "has more than %d variables", MaxEnvVars))
	}
	for k, v := range b.Env {
		if !envName.MatchString(k) {
			errs = append(errs, keyErr(at+".env", "a variable name is not letters, digits and underscores"))
			break
		}
		if strings.ContainsRune(v, 0) {
			// The process could never be started with it: it was
			// started again, and failed, for as long as the aggregator ran.
			errs = append(errs, keyErr(at+".env."+k, "holds a NUL byte, which no process's environment can"))
		}
	}
	for i, arg := range b.Command {
		if strings.ContainsRune(arg, 0) {
			errs = append(errs, keyErr(fmt.Sprintf("%s.command[%d]", at, i), "holds a NUL byte, which no process's arguments can"))
		}
	}
	if strings.ContainsRune(b.Dir, 0) {
		errs = append(errs, keyErr(at+".dir", "holds a NUL byte, which no path can"))
	}
	if len(b.Headers) > 0 {
		errs = append(errs, keyErr(at+".headers", "are HTTP's: a stdio server gets env instead"))
	}
	if mode := b.Auth.EffectiveMode(); mode != "" && mode != BackendAuthStatic {
		errs = append(errs, keyErr(at+".auth.mode", "is HTTP's: a stdio server gets its credentials in env"))
	}
	if b.Protocol == ProtocolModern {
		errs = append(errs, keyErr(at+".protocol", "2026-07-28 is not spoken over stdio here: a stdio server's one session is 2025-11-25"))
	}
	return errs
}
