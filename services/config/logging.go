package config

import (
	"log/slog"
	"strings"
)

// logLevels are the values logging.level takes, in any case, as the slog
// levels services/logging logs at; unset is info. The one list: the
// validation refuses what is not in it, rather than the logger silently
// logging at info.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError}

// Log formats logging.format takes, in any case; unset is json.
const (
	logFormatJSON = "json"
	logFormatText = "text"
)

// Validate refuses a level or format services/logging does not know: it
// would log at info, as json, without a word.
func (l Logging) Validate() error {
	if _, ok := logLevels[strings.ToLower(l.Level)]; !ok && l.Level != "" {
		return keyErr("logging.level", "want debug, info, warn or error")
	}
	if f := strings.ToLower(l.Format); f != "" && f != logFormatJSON && f != logFormatText {
		return keyErr("logging.format", "want %s or %s", logFormatJSON, logFormatText)
	}
	return nil
}

// SlogLevel is the level to log at: info when unset.
func (l Logging) SlogLevel() slog.Level {
	if level, ok := logLevels[strings.ToLower(l.Level)]; ok {
		return level
	}
	return slog.LevelInfo
}

// TextFormat reports whether records are written as text rather than
// JSON.
func (l Logging) TextFormat() bool { return strings.EqualFold(l.Format, logFormatText) }
