package pool

// targetOf is the model pp serves for the name a client asked (its own
// name, or the alias's target it serves) and that target's weight; ""
// when it serves neither.
func targetOf(pp *pooled, model string, aliases func(string) []ModelTarget) (string, int) {
	if ts := aliases(model); len(ts) > 0 {
		for _, t := range ts {
			if t.Provider != "" && t.Provider != pp.key.ID() {
				continue
			}
			if served := pp.served[t.Model]; served != "" {
				return served, max(1, t.Weight)
			}
		}
		return "", 0
	}
	return pp.served[model], 1
}

// swrr is smooth weighted round robin (nginx's): each pick adds every
// candidate's weight to its current value, takes the largest, and takes
// the total off the winner — exact shares, evenly interleaved.
type swrr map[string]int

func (s swrr) pick(ids []string, weights []int) int {
	total, best := 0, -1
	for i, id := range ids {
		s[id] += weights[i]
		total += weights[i]
		if best < 0 || s[id] > s[ids[best]] {
			best = i
		}
	}
	s[ids[best]] -= total
	return best
}
