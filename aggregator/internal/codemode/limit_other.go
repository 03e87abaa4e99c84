//go:build !unix

package codemode

import "errors"

func limit(int64) error { return errors.New("code mode runs on Unix only") }
