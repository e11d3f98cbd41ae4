package sqstest

// JSON shapes of the AWS JSON 1.0 SQS protocol. Member names are the
// service model's, which are not always capitalised (CreateQueue "tags",
// ListDeadLetterSourceQueues "queueUrls"), hence the explicit tags. Pointers
// mark members whose absence differs from their zero value.

type attrValue struct {
	DataType         string   `json:"DataType"`
	StringValue      *string  `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

type createQueueInput struct {
	QueueName  string            `json:"QueueName"`
	Attributes map[string]string `json:"Attributes"`
	Tags       map[string]string `json:"tags"`
}

type queueURLOutput struct {
	QueueURL string `json:"QueueUrl"`
}

type getQueueURLInput struct {
	QueueName              string `json:"QueueName"`
	QueueOwnerAWSAccountID string `json:"QueueOwnerAWSAccountId"`
}

type listQueuesInput struct {
	QueueNamePrefix string `json:"QueueNamePrefix"`
	NextToken       string `json:"NextToken"`
	MaxResults      *int   `json:"MaxResults"`
}

type listQueuesOutput struct {
	QueueURLs []string `json:"QueueUrls,omitempty"`
	NextToken string   `json:"NextToken,omitempty"`
}

type listDLQSourcesInput struct {
	QueueURL   string `json:"QueueUrl"`
	NextToken  string `json:"NextToken"`
	MaxResults *int   `json:"MaxResults"`
}

type listDLQSourcesOutput struct {
	QueueURLs []string `json:"queueUrls"`
	NextToken string   `json:"NextToken,omitempty"`
}

type queueInput struct {
	QueueURL string `json:"QueueUrl"`
}

type getQueueAttributesInput struct {
	QueueURL       string   `json:"QueueUrl"`
	AttributeNames []string `json:"AttributeNames"`
}

type attributesOutput struct {
	Attributes map[string]string `json:"Attributes,omitempty"`
}

type setQueueAttributesInput struct {
	QueueURL   string            `json:"QueueUrl"`
	Attributes map[string]string `json:"Attributes"`
}

type tagQueueInput struct {
	QueueURL string            `json:"QueueUrl"`
	Tags     map[string]string `json:"Tags"`
}

type untagQueueInput struct {
	QueueURL string   `json:"QueueUrl"`
	TagKeys  []string `json:"TagKeys"`
}

type listQueueTagsOutput struct {
	Tags map[string]string `json:"Tags,omitempty"`
}

type sendMessageInput struct {
	QueueURL                string               `json:"QueueUrl"`
	MessageBody             *string              `json:"MessageBody"`
	DelaySeconds            *int                 `json:"DelaySeconds"`
	MessageAttributes       map[string]attrValue `json:"MessageAttributes"`
	MessageSystemAttributes map[string]attrValue `json:"MessageSystemAttributes"`
	MessageDeduplicationID  *string              `json:"MessageDeduplicationId"`
	MessageGroupID          *string              `json:"MessageGroupId"`
}

type sendMessageOutput struct {
	MessageID                    string `json:"MessageId"`
	MD5OfMessageBody             string `json:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty"`
	SequenceNumber               string `json:"SequenceNumber,omitempty"`
}

type sendBatchEntry struct {
	ID string `json:"Id"`
	sendMessageInput
}

type sendMessageBatchInput struct {
	QueueURL string           `json:"QueueUrl"`
	Entries  []sendBatchEntry `json:"Entries"`
}

type sendBatchResult struct {
	ID string `json:"Id"`
	sendMessageOutput
}

type batchError struct {
	ID          string `json:"Id"`
	Code        string `json:"Code"`
	Message     string `json:"Message,omitempty"`
	SenderFault bool   `json:"SenderFault"`
}

type sendMessageBatchOutput struct {
	Successful []sendBatchResult `json:"Successful"`
	Failed     []batchError      `json:"Failed"`
}

type receiveMessageInput struct {
	QueueURL                    string   `json:"QueueUrl"`
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *int     `json:"VisibilityTimeout"`
	WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	ReceiveRequestAttemptID     string   `json:"ReceiveRequestAttemptId"`
}

type messageOutput struct {
	MessageID              string               `json:"MessageId"`
	ReceiptHandle          string               `json:"ReceiptHandle"`
	Body                   string               `json:"Body"`
	MD5OfBody              string               `json:"MD5OfBody"`
	MD5OfMessageAttributes string               `json:"MD5OfMessageAttributes,omitempty"`
	Attributes             map[string]string    `json:"Attributes,omitempty"`
	MessageAttributes      map[string]attrValue `json:"MessageAttributes,omitempty"`
}

type receiveMessageOutput struct {
	Messages []messageOutput `json:"Messages,omitempty"`
}

type deleteMessageInput struct {
	QueueURL      string `json:"QueueUrl"`
	ReceiptHandle string `json:"ReceiptHandle"`
}

type changeVisibilityInput struct {
	QueueURL          string `json:"QueueUrl"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

type batchEntry struct {
	ID                string `json:"Id"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

type handleBatchInput struct {
	QueueURL string       `json:"QueueUrl"`
	Entries  []batchEntry `json:"Entries"`
}

type batchID struct {
	ID string `json:"Id"`
}

type handleBatchOutput struct {
	Successful []batchID    `json:"Successful"`
	Failed     []batchError `json:"Failed"`
}

type empty struct{}

type startMoveTaskInput struct {
	SourceArn                    string `json:"SourceArn"`
	DestinationArn               string `json:"DestinationArn"`
	MaxNumberOfMessagesPerSecond *int   `json:"MaxNumberOfMessagesPerSecond"`
}

type startMoveTaskOutput struct {
	TaskHandle string `json:"TaskHandle"`
}

type cancelMoveTaskInput struct {
	TaskHandle string `json:"TaskHandle"`
}

type cancelMoveTaskOutput struct {
	ApproximateNumberOfMessagesMoved int64 `json:"ApproximateNumberOfMessagesMoved"`
}

type listMoveTasksInput struct {
	SourceArn  string `json:"SourceArn"`
	MaxResults *int   `json:"MaxResults"`
}

type moveTaskEntry struct {
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

type listMoveTasksOutput struct {
	Results []moveTaskEntry `json:"Results"`
}
