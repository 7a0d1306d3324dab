package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func main() {
	ctx := context.Background()
	cfg, _ := config.LoadDefaultConfig(ctx)
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:8600") })
	for name, v := range map[string]types.AttributeValue{
		"emptySS": &types.AttributeValueMemberSS{},
		"dupSS":   &types.AttributeValueMemberSS{Value: []string{"a", "a"}},
		"dupNS":   &types.AttributeValueMemberNS{Value: []string{"1", "1.0"}},
		"badN":    &types.AttributeValueMemberN{Value: "abc"},
		"spaceN":  &types.AttributeValueMemberN{Value: " 1"},
		"plusN":   &types.AttributeValueMemberN{Value: "+1"},
		"dupBS":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {1}}},
		"nested":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberSS{}}},
	} {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("tt2"),
			Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "probe"}},
			UpdateExpression:          aws.String("SET #a = :v"),
			ExpressionAttributeNames:  map[string]string{"#a": "x"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": v}})
		fmt.Println(name, err)
	}
}
