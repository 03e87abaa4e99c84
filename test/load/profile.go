package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxProfileBytes bounds one downloaded profile.
const maxProfileBytes = 64 << 20

// ProfileKinds are what a capture takes of each process, by file suffix:
// a CPU profile and the allocations made over the same seconds (a delta of
// the allocs profile, so what was allocated before does not count).
var ProfileKinds = []struct{ Suffix, Path string }{
	{"cpu", "/debug/pprof/profile"},
	{"allocs", "/debug/pprof/allocs"},
}

// ProfileFile is one profile written by a capture.
type ProfileFile struct {
	// Label names the workload ("w1-modern-c16"), Role the process.
	Label, Role, Kind string
	Path              string
}

// profileCapture is profiles being recorded from ops endpoints.
type profileCapture struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	files []ProfileFile
	errs  []error
}

// startProfiles asks each of ops (base URLs by role) for every kind of
// profile over seconds, in parallel, writing DIR/LABEL-ROLE-KIND.pprof.
func startProfiles(ctx context.Context, dir, label string, ops map[string]string, roles []string, seconds int) *profileCapture {
	p := &profileCapture{}
	for _, role := range roles {
		base, ok := ops[role]
		if !ok {
			p.errs = append(p.errs, fmt.Errorf("%s has no ops port to profile", role))
			continue
		}
		for _, k := range ProfileKinds {
			f := ProfileFile{Label: label, Role: role, Kind: k.Suffix, Path: filepath.Join(dir, fmt.Sprintf("%s-%s-%s.pprof", label, role, k.Suffix))}
			url := fmt.Sprintf("%s%s?seconds=%d", base, k.Path, seconds)
			p.wg.Go(func() {
				err := download(ctx, url, f.Path, time.Duration(seconds)*time.Second+30*time.Second)
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.errs = append(p.errs, fmt.Errorf("%s %s profile: %w", role, f.Kind, err))
					return
				}
				p.files = append(p.files, f)
			})
		}
	}
	return p
}

// wait returns the files written once every download ended.
func (p *profileCapture) wait() ([]ProfileFile, error) {
	p.wg.Wait()
	return p.files, errors.Join(p.errs...)
}

// download writes the body of GET url to path.
func download(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, oneLine(string(msg)))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProfileBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxProfileBytes {
		return fmt.Errorf("GET %s: profile larger than %d bytes", url, maxProfileBytes)
	}
	// A profile is gzipped protobuf; anything else is an error page.
	if len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		return fmt.Errorf("GET %s: not a profile (%d bytes)", url, len(body))
	}
	return os.WriteFile(path, body, 0o644)
}
