// Command openai-go streams a chat completion from iop with the official
// Go SDK. IOP_URL (default http://127.0.0.1:8080), IOP_MODEL (iop-sim) and
// IOP_API_KEY (if the edge requires keys) configure it.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func main() {
	client := openai.NewClient(
		option.WithBaseURL(cmp.Or(os.Getenv("IOP_URL"), "http://127.0.0.1:8080")+"/v1"),
		option.WithAPIKey(cmp.Or(os.Getenv("IOP_API_KEY"), "unused")),
	)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    cmp.Or(os.Getenv("IOP_MODEL"), "iop-sim"),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			fmt.Print(chunk.Choices[0].Delta.Content)
		}
	}
	fmt.Println()
	if err := stream.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "stream failed:", err)
		os.Exit(1)
	}
	fmt.Printf("finish_reason=%s\n", acc.Choices[0].FinishReason)
}
