package validate

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// platformArgDefault finds a BuildKit platform argument declared with a
// default value.
var platformArgDefault = regexp.MustCompile(`(?m)^\s*ARG\s+(TARGET(?:OS|ARCH|PLATFORM|VARIANT)|BUILDPLATFORM)=`)

// Stage is one FROM section of a Dockerfile.
type Stage struct {
	Name   string
	Base   string
	parent *Stage
	Labels map[string]string
	Env    map[string]string
	User   string
	Runs   []string
	Copies []string
	// Entrypoint is the raw JSON array of the exec form.
	Entrypoint string
}

// EffectiveBase follows stages built FROM other stages to the image.
func (s *Stage) EffectiveBase() string {
	for s.parent != nil {
		s = s.parent
	}
	return s.Base
}

// EffectiveUser is the USER in force, inherited from parent stages.
func (s *Stage) EffectiveUser() string {
	for ; s != nil; s = s.parent {
		if s.User != "" {
			return s.User
		}
	}
	return ""
}

// EffectiveLabels merges the labels of the stage and its parents.
func (s *Stage) EffectiveLabels() map[string]string {
	var chain []*Stage
	for ; s != nil; s = s.parent {
		chain = append(chain, s)
	}
	out := map[string]string{}
	for i := len(chain) - 1; i >= 0; i-- {
		maps.Copy(out, chain[i].Labels)
	}
	return out
}

// ParseDockerfile reads the instructions the checks need. It handles line
// continuations and comments; it is not a general Dockerfile parser.
func ParseDockerfile(text string) ([]*Stage, error) {
	var stages []*Stage
	byName := map[string]*Stage{}
	var lines []string
	var cur strings.Builder
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("dangling line continuation")
	}
	for _, l := range lines {
		instr, args, _ := strings.Cut(l, " ")
		args = strings.TrimSpace(args)
		instr = strings.ToUpper(instr)
		if instr == "ARG" && len(stages) == 0 {
			continue // global build arguments
		}
		if instr != "FROM" && len(stages) == 0 {
			return nil, fmt.Errorf("%s before the first FROM", instr)
		}
		var s *Stage
		if len(stages) > 0 {
			s = stages[len(stages)-1]
		}
		switch instr {
		case "FROM":
			f := strings.Fields(args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			st := &Stage{Labels: map[string]string{}, Env: map[string]string{}}
			switch {
			case len(f) == 1:
				st.Base = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.Base, st.Name = f[0], f[2]
			default:
				return nil, fmt.Errorf("cannot parse FROM %s", args)
			}
			st.parent = byName[st.Base]
			if st.Name != "" {
				byName[st.Name] = st
			}
			stages = append(stages, st)
		case "LABEL":
			kv, err := keyValues(args)
			if err != nil {
				return nil, fmt.Errorf("LABEL: %w", err)
			}
			maps.Copy(s.Labels, kv)
		case "ENV":
			kv, err := keyValues(args)
			if err != nil {
				return nil, fmt.Errorf("ENV: %w", err)
			}
			maps.Copy(s.Env, kv)
		case "USER":
			s.User = args
		case "RUN":
			s.Runs = append(s.Runs, args)
		case "COPY":
			s.Copies = append(s.Copies, args)
		case "ENTRYPOINT":
			s.Entrypoint = args
		}
	}
	return stages, nil
}

var kvPattern = regexp.MustCompile(`^([A-Za-z0-9_.\-]+)=("(?:[^"\\]|\\.)*"|\S*)\s*`)

func keyValues(s string) (map[string]string, error) {
	out := map[string]string{}
	s = strings.TrimSpace(s)
	for s != "" {
		m := kvPattern.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("cannot parse %q (use key=value)", s)
		}
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			uq, err := strconv.Unquote(v)
			if err != nil {
				return nil, err
			}
			v = uq
		}
		out[m[1]] = v
		s = s[len(m[0]):]
	}
	return out, nil
}

// ImageTargets maps each final Dockerfile stage to the binary it ships.
var ImageTargets = map[string]string{
	"gateway":      "switchboard-gateway",
	"aggregator":   "switchboard-aggregator",
	"indexer":      "switchboard-indexer",
	"demo-backend": "switchboard-demo-backend",
}

var requiredLabels = []string{
	"org.opencontainers.image.title", "org.opencontainers.image.description",
	"org.opencontainers.image.source", "org.opencontainers.image.version",
	"org.opencontainers.image.revision", "org.opencontainers.image.created",
}

// CheckDockerfile checks the root Dockerfile: a static, trimmed build, and a
// non-root, labelled, minimal final stage for each binary whose source
// exists under repoRoot.
func CheckDockerfile(text, repoRoot string) []error {
	var p problems
	stages, err := ParseDockerfile(text)
	if err != nil {
		return []error{err}
	}
	var build *Stage
	for _, s := range stages {
		for _, r := range s.Runs {
			if strings.Contains(r, "go build") {
				build = s
			}
		}
	}
	if build == nil {
		return []error{fmt.Errorf("no stage runs go build")}
	}
	// BuildKit fills the platform arguments from --platform only where
	// they are declared without a value: a default wins over the platform,
	// and every image of a multi-platform build gets the default's binary.
	for _, m := range platformArgDefault.FindAllStringSubmatch(text, -1) {
		p.addf("ARG %s has a default, which BuildKit uses instead of the --platform being built: declare it without one", m[1])
	}
	buildCmd := strings.Join(build.Runs, " ")
	if !strings.Contains(buildCmd, "GOARCH=$TARGETARCH") || !strings.Contains(buildCmd, "GOOS=$TARGETOS") {
		p.addf("build stage %s: go build does not take GOOS and GOARCH from TARGETOS and TARGETARCH, so a multi-platform build gets one platform's binaries", build.Name)
	}
	if build.Env["CGO_ENABLED"] != "0" && !strings.Contains(buildCmd, "CGO_ENABLED=0") {
		p.addf("build stage %s: CGO_ENABLED=0 is not set, so the binaries may link libc", build.Name)
	}
	if !strings.Contains(buildCmd, "-trimpath") {
		p.addf("build stage %s: go build without -trimpath", build.Name)
	}
	if !strings.Contains(buildCmd, "services/lifecycle.Version=") {
		p.addf("build stage %s: the version is not stamped into the binaries", build.Name)
	}
	for _, s := range stages {
		if s.parent == nil && (!strings.Contains(s.Base, ":") || strings.HasSuffix(s.Base, ":latest")) && s.Base != "scratch" {
			p.addf("stage %s: base image %q must carry a tag", s.Name, s.Base)
		}
	}
	found := map[string]bool{}
	for _, s := range stages {
		bin, ok := ImageTargets[s.Name]
		if !ok {
			continue
		}
		found[s.Name] = true
		who := "stage " + s.Name
		base := s.EffectiveBase()
		if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
			p.addf("%s: base %s is not distroless/static or scratch", who, base)
		}
		user := s.EffectiveUser()
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			p.addf("%s: USER %q must be a numeric non-root UID (runAsNonRoot can only verify numbers)", who, user)
		}
		labels := s.EffectiveLabels()
		for _, l := range requiredLabels {
			if labels[l] == "" {
				p.addf("%s: label %s missing", who, l)
			}
		}
		if labels["org.opencontainers.image.title"] != bin {
			p.addf("%s: image title %q, want %q", who, labels["org.opencontainers.image.title"], bin)
		}
		if s.Entrypoint != fmt.Sprintf(`["/usr/local/bin/%s"]`, bin) {
			p.addf("%s: ENTRYPOINT %s, want the exec form of /usr/local/bin/%s", who, s.Entrypoint, bin)
		}
		copied := false
		for _, c := range s.Copies {
			copied = copied || strings.Contains(c, "--from="+build.Name) && strings.Contains(c, "/"+bin+" ")
		}
		if !copied {
			p.addf("%s: does not copy %s from the %s stage", who, bin, build.Name)
		}
		pkg := ""
		for _, f := range strings.Fields(buildCmd) {
			if strings.HasSuffix(f, "/cmd/"+bin) {
				pkg = f
			}
		}
		if pkg == "" {
			p.addf("%s: the build stage does not build %s", who, bin)
		} else if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(pkg))); err != nil {
			p.addf("%s: package %s: %v", who, pkg, err)
		}
	}
	for target := range ImageTargets {
		if !found[target] {
			p.addf("no final stage %q", target)
		}
	}
	return p
}
