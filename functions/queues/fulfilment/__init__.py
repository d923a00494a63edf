"""What every order-fulfilment consumer shares: reading an order line, reserving stock."""
