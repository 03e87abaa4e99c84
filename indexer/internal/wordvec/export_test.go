package wordvec

// DotGeneric is dotGeneric, for comparing with Dot.
var DotGeneric = dotGeneric
