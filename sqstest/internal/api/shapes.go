package api

// JSON shapes of the AWS JSON 1.0 SQS protocol. Member names are the
// service model's, which are not always capitalised (CreateQueue "tags",
// ListDeadLetterSourceQueues "queueUrls"), hence the explicit tags. Pointers
// mark members whose absence differs from their zero value.

type AttrValue struct {
	DataType         string   `json:"DataType"`
	StringValue      *string  `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

type CreateQueueInput struct {
	QueueName  string            `json:"QueueName"`
	Attributes map[string]string `json:"Attributes"`
	Tags       map[string]string `json:"tags"`
}

type QueueURLOutput struct {
	QueueURL string `json:"QueueUrl"`
}

type GetQueueURLInput struct {
	QueueName              string `json:"QueueName"`
	QueueOwnerAWSAccountID string `json:"QueueOwnerAWSAccountId"`
}

type ListQueuesInput struct {
	QueueNamePrefix string `json:"QueueNamePrefix"`
	NextToken       string `json:"NextToken"`
	MaxResults      *int   `json:"MaxResults"`
}

type ListQueuesOutput struct {
	QueueURLs []string `json:"QueueUrls,omitempty"`
	NextToken string   `json:"NextToken,omitempty"`
}

type ListDLQSourcesInput struct {
	QueueURL   string `json:"QueueUrl"`
	NextToken  string `json:"NextToken"`
	MaxResults *int   `json:"MaxResults"`
}

type ListDLQSourcesOutput struct {
	QueueURLs []string `json:"queueUrls"`
	NextToken string   `json:"NextToken,omitempty"`
}

type QueueInput struct {
	QueueURL string `json:"QueueUrl"`
}

type GetQueueAttributesInput struct {
	QueueURL       string   `json:"QueueUrl"`
	AttributeNames []string `json:"AttributeNames"`
}

type AttributesOutput struct {
	Attributes map[string]string `json:"Attributes,omitempty"`
}

type SetQueueAttributesInput struct {
	QueueURL   string            `json:"QueueUrl"`
	Attributes map[string]string `json:"Attributes"`
}

type TagQueueInput struct {
	QueueURL string            `json:"QueueUrl"`
	Tags     map[string]string `json:"Tags"`
}

type UntagQueueInput struct {
	QueueURL string   `json:"QueueUrl"`
	TagKeys  []string `json:"TagKeys"`
}

type ListQueueTagsOutput struct {
	Tags map[string]string `json:"Tags,omitempty"`
}

type SendMessageInput struct {
	QueueURL                string               `json:"QueueUrl"`
	MessageBody             *string              `json:"MessageBody"`
	DelaySeconds            *int                 `json:"DelaySeconds"`
	MessageAttributes       map[string]AttrValue `json:"MessageAttributes"`
	MessageSystemAttributes map[string]AttrValue `json:"MessageSystemAttributes"`
	MessageDeduplicationID  *string              `json:"MessageDeduplicationId"`
	MessageGroupID          *string              `json:"MessageGroupId"`
}

type SendMessageOutput struct {
	MessageID                    string `json:"MessageId"`
	MD5OfMessageBody             string `json:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty"`
	SequenceNumber               string `json:"SequenceNumber,omitempty"`
}

type SendBatchEntry struct {
	ID string `json:"Id"`
	SendMessageInput
}

type SendMessageBatchInput struct {
	QueueURL string           `json:"QueueUrl"`
	Entries  []SendBatchEntry `json:"Entries"`
}

type SendBatchResult struct {
	ID string `json:"Id"`
	SendMessageOutput
}

type BatchError struct {
	ID          string `json:"Id"`
	Code        string `json:"Code"`
	Message     string `json:"Message,omitempty"`
	SenderFault bool   `json:"SenderFault"`
}

type SendMessageBatchOutput struct {
	Successful []SendBatchResult `json:"Successful"`
	Failed     []BatchError      `json:"Failed"`
}

type ReceiveMessageInput struct {
	QueueURL                    string   `json:"QueueUrl"`
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *int     `json:"VisibilityTimeout"`
	WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	ReceiveRequestAttemptID     string   `json:"ReceiveRequestAttemptId"`
}

type MessageOutput struct {
	MessageID              string               `json:"MessageId"`
	ReceiptHandle          string               `json:"ReceiptHandle"`
	Body                   string               `json:"Body"`
	MD5OfBody              string               `json:"MD5OfBody"`
	MD5OfMessageAttributes string               `json:"MD5OfMessageAttributes,omitempty"`
	Attributes             map[string]string    `json:"Attributes,omitempty"`
	MessageAttributes      map[string]AttrValue `json:"MessageAttributes,omitempty"`
}

type ReceiveMessageOutput struct {
	Messages []MessageOutput `json:"Messages,omitempty"`
}

type DeleteMessageInput struct {
	QueueURL      string `json:"QueueUrl"`
	ReceiptHandle string `json:"ReceiptHandle"`
}

type ChangeVisibilityInput struct {
	QueueURL          string `json:"QueueUrl"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

type BatchEntry struct {
	ID                string `json:"Id"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

type HandleBatchInput struct {
	QueueURL string       `json:"QueueUrl"`
	Entries  []BatchEntry `json:"Entries"`
}

type BatchID struct {
	ID string `json:"Id"`
}

type HandleBatchOutput struct {
	Successful []BatchID    `json:"Successful"`
	Failed     []BatchError `json:"Failed"`
}

type Empty struct{}

type StartMoveTaskInput struct {
	SourceArn                    string `json:"SourceArn"`
	DestinationArn               string `json:"DestinationArn"`
	MaxNumberOfMessagesPerSecond *int   `json:"MaxNumberOfMessagesPerSecond"`
}

type StartMoveTaskOutput struct {
	TaskHandle string `json:"TaskHandle"`
}

type CancelMoveTaskInput struct {
	TaskHandle string `json:"TaskHandle"`
}

type CancelMoveTaskOutput struct {
	ApproximateNumberOfMessagesMoved int64 `json:"ApproximateNumberOfMessagesMoved"`
}

type ListMoveTasksInput struct {
	SourceArn  string `json:"SourceArn"`
	MaxResults *int   `json:"MaxResults"`
}

type MoveTaskEntry struct {
	TaskHandle                        string `json:"TaskHandle,omitempty"`
	Status                            string `json:"Status"`
	SourceArn                         string `json:"SourceArn"`
	DestinationArn                    string `json:"DestinationArn,omitempty"`
	MaxNumberOfMessagesPerSecond      *int   `json:"MaxNumberOfMessagesPerSecond,omitempty"`
	ApproximateNumberOfMessagesMoved  int64  `json:"ApproximateNumberOfMessagesMoved"`
	ApproximateNumberOfMessagesToMove *int64 `json:"ApproximateNumberOfMessagesToMove,omitempty"`
	FailureReason                     string `json:"FailureReason,omitempty"`
	StartedTimestamp                  int64  `json:"StartedTimestamp"`
}

type ListMoveTasksOutput struct {
	Results []MoveTaskEntry `json:"Results"`
}
