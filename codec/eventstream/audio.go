package eventstream

// audio observes one event of a media stream (a streamed transcription's
// transcript.text.* events, speech's speech.audio.* events, streamed
// image generations and edits): the stream ends with its own *.done or
// *.completed event, and an error event is the upstream's.
func (o *Observer) audio(ev Event) {
	e, typ := o.typed(ev)
	if e == nil {
		return
	}
	switch typ {
	case "transcript.text.delta":
		o.Output.event(len(e.GetStringBytes("delta")))
	case "speech.audio.delta":
		o.Output.event(len(e.GetStringBytes("audio")))
	case "transcript.text.done", "speech.audio.done", "image_generation.completed", "image_edit.completed":
		if u := e.Get("usage"); present(u) {
			o.Usage = usageOf(u)
		}
		o.Done, o.Ended = true, true
	case "error":
		if ue := chunkError(e); ue != nil {
			o.setErr(ue)
		}
	}
}
