"""What is trained: the models by name, the data sets (synthetic images, the bundled digits and Shakespeare text)
and the networks for them."""
