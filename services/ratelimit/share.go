package ratelimit

// FairShare is how many live records one principal may hold while all
// the principals behind one credential hold held of the credential's
// bound, bound: its whole share while at most half the bound is used,
// then less in proportion to what is left, and always one. A fixed share
// alone let a few principals that each kept to theirs (ten of a tenth)
// use up the bound, so that every other principal was refused until
// their records expired; with this rule those holding many are refused
// first, and one holding none still gets a place while any is left.
func FairShare(share, held, bound int) int {
	return max(1, min(share, 2*share*(bound-held)/bound))
}
